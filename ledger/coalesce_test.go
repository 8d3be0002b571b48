package ledger_test

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// admission is one admitted decision: when (cluster time) and how much.
type admission struct {
	ts     uint64
	amount uint64
}

// maxInWindow returns the most units admitted in any interval of length w.
func maxInWindow(as []admission, w time.Duration) uint64 {
	slices.SortFunc(as, func(a, b admission) int { return cmp(a.ts, b.ts) })
	var best, sum uint64
	j := 0
	for i := range as {
		sum += as[i].amount
		for as[j].ts+uint64(w) <= as[i].ts {
			sum -= as[j].amount
			j++
		}
		best = max(best, sum)
	}
	return best
}

func cmp(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// load describes how hammer hammers one user.
type load struct {
	rounds, callers, calls int
	maxAmount              uint64 // amounts are random in [1, maxAmount]
	pause                  [2]int // ms between rounds, random in [min, max)
}

// hammer runs rounds of concurrent calls for key from callers goroutines
// spread over clients (processes sharing one cluster), letting time pass
// between rounds, and returns what was admitted and how many were denied.
func hammer(t *testing.T, b *testenv.Backend, clients []*ledger.Client, r ledger.Resource, key string, l load) ([]admission, int) {
	t.Helper()
	var mu sync.Mutex
	var admitted []admission
	denied := 0
	for round := 0; round < l.rounds; round++ {
		var wg sync.WaitGroup
		for g := 0; g < l.callers; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				c := clients[g%len(clients)]
				for i := 0; i < l.calls; i++ {
					amount := 1 + rng.Uint64N(l.maxAmount)
					d, err := c.Acquire(ctx, r, ledger.Request{User: key, Amount: amount})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if d.Allowed {
						admitted = append(admitted, admission{d.Timestamp, amount})
					} else {
						denied++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		b.Advance(t, time.Duration(l.pause[0]+rand.IntN(l.pause[1]-l.pause[0]))*time.Millisecond)
	}
	return admitted, denied
}

func TestMaxInWindow(t *testing.T) {
	s := uint64(time.Second)
	as := []admission{{0, 3}, {s / 2, 4}, {s, 5}, {3 * s / 2, 1}}
	if got := maxInWindow(as, time.Second); got != 9 {
		t.Fatalf("maxInWindow = %d, want 9 (4 at 0.5s + 5 at 1s)", got)
	}
}

// Exact coalescing never admits more than the limit in any window: many
// goroutines, random amounts and arrival times, several Clients (processes)
// sharing one cluster.
func TestCoalescingPropertyExact(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		const limit = 400
		w := time.Second
		r := ledger.Resource{Name: "prop", Ledger: b.NewLedger(), Kind: ledger.KindBytes, Window: w, DefaultLimit: limit, Lazy: true}
		clients := []*ledger.Client{
			ledger.New(b.Client, ledger.WithCoalescing(0)),
			ledger.New(b.Client, ledger.WithCoalescing(200*time.Microsecond)),
			ledger.New(b.Client), // a process that does not coalesce
		}
		if err := clients[0].CreateResource(ctx, r); err != nil {
			t.Fatal(err)
		}
		rounds := 12
		if b.Real {
			rounds = 4
		}
		admitted, denied := hammer(t, b, clients, r, "shared", load{rounds: rounds, callers: 48, calls: 10, maxAmount: 6, pause: [2]int{100, 600}})
		if len(admitted) == 0 || denied == 0 {
			t.Fatalf("%d admitted, %d denied: the test must see both", len(admitted), denied)
		}
		if got := maxInWindow(admitted, w); got > limit {
			t.Fatalf("%d units admitted within one window, limit %d", got, limit)
		}
		t.Logf("%d admitted, %d denied", len(admitted), denied)
	})
}

// Coalescing merges concurrent decisions of one user into few transfers.
func TestCoalescingMerges(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c := ledger.New(b.Client, ledger.WithCoalescing(500*time.Microsecond))
		r := ledger.Resource{Name: "merge", Ledger: b.NewLedger(), Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 1000, Lazy: true}
		if err := c.CreateResource(ctx, r); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Acquire(ctx, r, ledger.Request{User: "hot", Amount: 1}); err != nil { // provisions
			t.Fatal(err)
		}
		before := c.Stats().CreateTransfers.Events
		var wg sync.WaitGroup
		var mu sync.Mutex
		allowed := 0
		remaining := map[uint64]bool{}
		for g := 0; g < 64; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					d, err := c.Acquire(ctx, r, ledger.Request{User: "hot", Amount: 1})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if d.Allowed {
						allowed++
						if remaining[d.Remaining] {
							t.Errorf("two decisions left %d remaining", d.Remaining)
						}
						remaining[d.Remaining] = true
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		sent := c.Stats().CreateTransfers.Events - before
		if allowed != 999 {
			t.Fatalf("allowed %d, want 999", allowed)
		}
		if sent*4 > uint64(allowed) {
			t.Fatalf("%d transfers for %d decisions: not merged", sent, allowed)
		}
		u := inspect(t, c, r, "hot")
		if u.InFlight != 1000 || u.Available != 0 {
			t.Fatalf("Inspect = %+v, want 1000 in flight", u)
		}
		// Drained: further calls are denied without sending anything.
		before = c.Stats().CreateTransfers.Events
		for i := 0; i < 100; i++ {
			if d, err := c.Acquire(ctx, r, ledger.Request{User: "hot", Amount: 1}); err != nil || d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("Acquire on a drained user = %+v, %v", d, err)
			}
		}
		if sent := c.Stats().CreateTransfers.Events - before; sent > 1 {
			t.Fatalf("%d transfers sent for 100 decisions on a drained user, want at most 1", sent)
		}
	})
}

// Units that no waiting caller can use are given back at once.
func TestCoalescingGivesBackLeftovers(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c := ledger.New(b.Client, ledger.WithCoalescing(0))
		r := ledger.Resource{Name: "left", Ledger: b.NewLedger(), Kind: ledger.KindBytes, Window: time.Hour, DefaultLimit: 10, Lazy: true}
		if err := c.CreateResource(ctx, r); err != nil {
			t.Fatal(err)
		}
		if d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 7}); err != nil || !d.Allowed {
			t.Fatalf("Acquire(7) = %+v, %v", d, err)
		}
		// 3 left: a request for 5 gets a balancing transfer of 3 and is denied;
		// the 3 must come back.
		if d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 5}); err != nil || d.Allowed {
			t.Fatalf("Acquire(5) = %+v, %v; want denied", d, err)
		}
		if u := inspect(t, c, r, "u"); u.Available != 3 {
			t.Fatalf("Inspect = %+v, want 3 available after the denial", u)
		}
	})
}
