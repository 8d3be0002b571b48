package testenv

import (
	"slices"
	"sync"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/internal/launch"
)

func TestEachRunsTheBodyOnEveryBackend(t *testing.T) {
	var mu sync.Mutex
	ran := map[string]bool{}
	Each(t, func(t *testing.T, b *Backend) {
		mu.Lock()
		ran[b.Name] = true
		mu.Unlock()
		if want := b.Name == "modelled" || b.Name == "tigerbeetle"; b.Real != want {
			t.Errorf("Real = %v for %s", b.Real, b.Name)
		}
		ledger := b.NewLedger()
		a, c := tb.ID(), tb.ID()
		res, err := b.Client.CreateAccounts([]tb.Account{{ID: a, Ledger: ledger, Code: 1}})
		if err != nil || len(res) != 1 || res[0].Status != tb.AccountCreated {
			t.Fatalf("CreateAccounts = %+v, %v", res, err)
		}
		step := 10 * time.Millisecond
		if !b.Real {
			step = time.Hour // instant on the embedded engine
		}
		begin, before := time.Now(), b.Now()
		b.Advance(t, step)
		if got := b.Now().Sub(before); got < step {
			t.Errorf("Now() moved %v after Advance(%v)", got, step)
		}
		if !b.Real && time.Since(begin) > time.Second {
			t.Errorf("Advance(%v) on the embedded engine took %v", step, time.Since(begin))
		}
		if _, err := b.Client.CreateAccounts([]tb.Account{{ID: c, Ledger: ledger, Code: 1}}); err != nil {
			t.Fatal(err)
		}
		accounts, err := b.Client.LookupAccounts([]tb.Uint128{a, c})
		if err != nil || len(accounts) != 2 {
			t.Fatalf("LookupAccounts = %+v, %v", accounts, err)
		}
		if d := time.Duration(accounts[1].Timestamp - accounts[0].Timestamp); d < step {
			t.Errorf("timestamps %v apart after Advance(%v)", d, step)
		}
	})
	if !ran["embedded"] || !ran["stored"] {
		t.Errorf("ran %v: want the embedded and stored subtests always", ran)
	}
	if ran["modelled"] == testing.Short() {
		t.Errorf("the modelled subtest ran %v under -short %v: want it always, but under -short", ran["modelled"], testing.Short())
	}
	if _, err := launch.FindBinary(""); err != nil || testing.Short() {
		if ran["tigerbeetle"] {
			t.Error("the tigerbeetle subtest ran without a binary or under -short")
		}
	}
}

func TestNewLedgerUnique(t *testing.T) {
	t.Parallel()
	var b Backend
	const goroutines, each = 8, 1000
	got := make(chan uint32, goroutines*each)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				got <- b.NewLedger()
			}
		})
	}
	wg.Wait()
	close(got)
	seen := map[uint32]bool{}
	for l := range got {
		if l == 0 || seen[l] {
			t.Fatalf("NewLedger() = %d: zero or repeated", l)
		}
		seen[l] = true
	}
}

func TestAdvanceRejectsNegative(t *testing.T) {
	t.Parallel()
	c := &captureTB{TB: t}
	var b Backend
	c.run(func(tb testing.TB) { b.Advance(tb, -time.Second) })
	if c.failed == "" {
		t.Error("Advance(-1s) did not fail the test")
	}
}

func TestSharedNeedsMain(t *testing.T) {
	mainRunning.Store(false)
	defer mainRunning.Store(true)
	c := &captureTB{TB: t}
	c.run(func(tb testing.TB) { Shared(tb) })
	if c.failed == "" {
		t.Error("Shared without Main did not fail the test")
	}
}

func TestInTime(t *testing.T) {
	t.Parallel()
	var runs []time.Duration
	real := &Backend{Real: true}
	real.InTime(t, time.Second, 8*time.Second, func(w time.Duration) bool {
		runs = append(runs, w)
		return w >= 4*time.Second
	})
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}; !slices.Equal(runs, want) {
		t.Errorf("InTime ran with %v, want %v", runs, want)
	}
	for _, b := range []*Backend{{}, {Real: true}} {
		c := &captureTB{TB: t}
		c.run(func(tb testing.TB) {
			b.InTime(tb, time.Second, 2*time.Second, func(time.Duration) bool { return false })
		})
		if c.failed == "" {
			t.Errorf("InTime on Real=%v with a body that never fits did not fail", b.Real)
		}
	}
	if !Within(10, 10+uint64(time.Second)-1, time.Second) || Within(10, 10+uint64(time.Second), time.Second) {
		t.Error("Within: a unit is held until exactly one window after its timestamp")
	}
}
