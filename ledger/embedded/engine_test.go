package embedded_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// engineFixture is a fixture on a fresh engine with a manual clock.
func engineFixture(t *testing.T) (*fixture, *embedded.Engine, *embedded.ManualClock) {
	clock := embedded.NewManualClock(epoch)
	e := embedded.New(embedded.WithClock(clock))
	t.Cleanup(e.Close)
	return &fixture{t: t, c: e, ledger: 1}, e, clock
}

func TestManualClock(t *testing.T) {
	c := embedded.NewManualClock(epoch)
	if got := c.Now(); !got.Equal(epoch) {
		t.Fatalf("Now() = %v, want %v", got, epoch)
	}
	c.Advance(time.Second)
	if got := c.Now(); !got.Equal(epoch.Add(time.Second)) {
		t.Fatalf("after Advance(1s): Now() = %v", got)
	}
	c.Set(epoch.Add(-time.Hour))
	if got := c.Now(); !got.Equal(epoch.Add(-time.Hour)) {
		t.Fatalf("after Set: Now() = %v", got)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got := c.Now(); !got.Equal(epoch.Add(-time.Hour + 400*time.Millisecond)) {
		t.Fatalf("after concurrent Advance: Now() = %v", got)
	}
}

func TestTimestampsFollowTheClock(t *testing.T) {
	f, _, clock := engineFixture(t)
	acc := f.accounts(0, 0)
	// The first event of a request is stamped just after the clock.
	clock.Advance(time.Hour)
	res := f.must(f.transfer(acc[0], acc[1], 1), f.transfer(acc[0], acc[1], 1))
	want := uint64(epoch.Add(time.Hour).UnixNano()) + 1
	if res[0].Timestamp != want || res[1].Timestamp != want+1 {
		t.Fatalf("timestamps %d, %d; want %d, %d", res[0].Timestamp, res[1].Timestamp, want, want+1)
	}
	// The clock going backwards does not make timestamps go backwards.
	prev := res[1].Timestamp
	clock.Set(epoch.Add(-24 * time.Hour))
	for range 3 {
		r := f.must(f.transfer(acc[0], acc[1], 1))[0]
		if r.Timestamp <= prev {
			t.Fatalf("timestamp %d after %d: went backwards with the clock", r.Timestamp, prev)
		}
		prev = r.Timestamp
	}
	a := f.lookupAccount(acc[0])
	if a.Timestamp >= res[0].Timestamp {
		t.Fatalf("account timestamp %d not before %d", a.Timestamp, res[0].Timestamp)
	}
}

// TestExpiryInstant checks that a pending transfer expires at exactly
// timestamp + timeout seconds.
func TestExpiryInstant(t *testing.T) {
	f, e, clock := engineFixture(t)
	acc := f.accounts(0, 0)
	p := f.pending(acc[0], acc[1], 3, 2)
	q := f.pending(acc[0], acc[1], 4, 2)
	res := f.must(p, q)
	expires := res[0].Timestamp + 2e9 // q expires 1 ns later
	clock.Set(time.Unix(0, int64(expires-1)))

	f.balance(acc[0], bal{dPend: 7}) // a read stamped expires-1
	f.balance(acc[0], bal{dPend: 4}) // a read stamped expires: p is released
	// This request is stamped after q's instant too.
	f.expect([]tb.Transfer{f.resolve(fVoid, q, u(0))}, tb.TransferPendingTransferExpired)
	f.balance(acc[0], bal{})
	if s := e.Stats(); s.Expired != 2 || s.Pending != 0 {
		t.Fatalf("Stats() = %+v, want 2 expired, 0 pending", s)
	}
}

func TestManyExpiries(t *testing.T) {
	f, e, clock := engineFixture(t)
	acc := f.accounts(aDebitsLimited, 0)
	user, op := acc[0], acc[1]
	f.fund(user, 1000)
	// 1000 reservations of 1 unit with timeouts 1..10 s, some posted or voided.
	var batch []tb.Transfer
	for i := range 1000 {
		batch = append(batch, f.pending(user, op, 1, uint32(1+i%10)))
	}
	for i := 0; i < len(batch); i += 100 {
		f.must(batch[i : i+100]...)
	}
	f.expect([]tb.Transfer{f.pending(user, op, 1, 1)}, tb.TransferExceedsCredits)
	f.must(f.resolve(fPost, batch[0], u(1)), f.resolve(fVoid, batch[1], u(0)))
	// The transfers were stamped a few nanoseconds after the clock: after s
	// seconds, those with a timeout under s have expired.
	for s := 1; s <= 11; s++ {
		clock.Advance(time.Second)
		a := f.lookupAccount(user)
		held := 0
		for i := 2; i < 1000; i++ {
			if 1+i%10 >= s {
				held++
			}
		}
		if got := balOf(a); got.dPend != uint64(held) {
			t.Fatalf("after %d s: debits pending %d, want %d", s, got.dPend, held)
		}
	}
	if st := e.Stats(); st.Expired != 998 || st.Pending != 0 {
		t.Fatalf("Stats() = %+v, want 998 expired, 0 pending", st)
	}
	f.balance(user, bal{dPost: 1, cPost: 1000})
}

func TestStats(t *testing.T) {
	f, e, _ := engineFixture(t)
	acc := f.accounts(0, 0)
	p := f.pending(acc[0], acc[1], 1, 0)
	f.must(p, f.transfer(acc[0], acc[1], 1))
	f.expect([]tb.Transfer{f.transfer(acc[0], acc[0], 1)}, tb.TransferAccountsMustBeDifferent)
	f.lookupAccount(acc[0])
	f.lookupTransfer(p.ID)
	if _, err := e.GetAccountTransfers(tb.AccountFilter{AccountID: acc[0], Limit: 10, Flags: both}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.QueryAccounts(tb.QueryFilter{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	_, _ = e.CreateTransfers(make([]tb.Transfer, 9000)) // refused: not counted
	got := e.Stats()
	want := embedded.Stats{
		CreateAccounts:      embedded.OpStats{Requests: 1, Events: 2},
		CreateTransfers:     embedded.OpStats{Requests: 2, Events: 3},
		LookupAccounts:      embedded.OpStats{Requests: 1, Events: 1},
		LookupTransfers:     embedded.OpStats{Requests: 1, Events: 1},
		GetAccountTransfers: embedded.OpStats{Requests: 1, Events: 1},
		QueryAccounts:       embedded.OpStats{Requests: 1, Events: 1},
		Accounts:            2,
		Transfers:           2,
		Pending:             1,
	}
	if got != want {
		t.Fatalf("Stats() = %+v\nwant %+v", got, want)
	}
}

func TestDefaultClock(t *testing.T) {
	e := embedded.New()
	defer e.Close()
	before := uint64(time.Now().UnixNano())
	res, err := e.CreateAccounts([]tb.Account{{ID: tb.ID(), Ledger: 1, Code: 1}})
	if err != nil || res[0].Status != tb.AccountCreated {
		t.Fatalf("CreateAccounts = %v, %v", res, err)
	}
	if after := uint64(time.Now().UnixNano()); res[0].Timestamp <= before || res[0].Timestamp > after+10 {
		t.Fatalf("timestamp %d not within [%d, %d]", res[0].Timestamp, before, after)
	}
}

// TestDeterministic applies the same requests at the same times to two
// engines and expects the same results and state.
func TestDeterministic(t *testing.T) {
	run := func() []any {
		f, e, clock := engineFixture(t)
		var out []any
		a := tb.Account{ID: u(1), Ledger: 1, Code: 1, Flags: aDebitsLimited | aHistory}
		c := tb.Account{ID: u(2), Ledger: 1, Code: 1}
		out = append(out, f.createAccounts(a, c))
		out = append(out, f.create(tb.Transfer{ID: u(10), DebitAccountID: u(2), CreditAccountID: u(1), Amount: u(5), Ledger: 1, Code: 1}))
		for i := range 20 {
			clock.Advance(300 * time.Millisecond)
			out = append(out, f.create(tb.Transfer{ID: u(uint64(100 + i)), DebitAccountID: u(1), CreditAccountID: u(2), Amount: u(1), Ledger: 1, Code: 1, Flags: fPending, Timeout: 1}))
		}
		bal, err := e.GetAccountBalances(tb.AccountFilter{AccountID: u(1), Limit: 100, Flags: both})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := e.QueryTransfers(tb.QueryFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return append(out, bal, tr, f.lookupAccount(u(1)), e.Stats())
	}
	a, b := run(), run()
	for i := range a {
		if fmtAny(a[i]) != fmtAny(b[i]) {
			t.Fatalf("run 1 and run 2 differ at step %d:\n%v\n%v", i, a[i], b[i])
		}
	}
}

func fmtAny(v any) string { return strings.TrimSpace(strings.ReplaceAll(sprint(v), "\n", " ")) }

func sprint(v any) string { return fmt.Sprintf("%+v", v) }

// TestRetainedBytesPerTransfer measures the heap retained per stored
// pending transfer (the figure in the package documentation).
func TestRetainedBytesPerTransfer(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	clock := embedded.NewManualClock(epoch)
	e := embedded.New(embedded.WithClock(clock))
	defer e.Close()
	res, err := e.CreateAccounts([]tb.Account{
		{ID: u(1), Ledger: 1, Code: 1},
		{ID: u(2), Ledger: 1, Code: 1},
	})
	if err != nil || res[1].Status != tb.AccountCreated {
		t.Fatal(res, err)
	}
	batch := make([]tb.Transfer, 8189)
	id := uint64(1)
	create := func(count int) {
		for count > 0 {
			k := min(count, len(batch))
			for i := range k {
				batch[i] = tb.Transfer{ID: tb.ID(), DebitAccountID: u(1), CreditAccountID: u(2), Amount: u(1), Ledger: 1, Code: 1, Flags: fPending, Timeout: 3600}
				id++
			}
			if _, err := e.CreateTransfers(batch[:k]); err != nil {
				t.Fatal(err)
			}
			count -= k
		}
	}
	create(1000) // warm up
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	create(n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perTransfer := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	t.Logf("%d pending transfers: %.0f bytes retained per transfer", n, perTransfer)
	if s := e.Stats(); s.Transfers != uint64(n+1000) {
		t.Fatalf("Stats().Transfers = %d, want %d", s.Transfers, n+1000)
	}
	if perTransfer > 200 {
		t.Fatalf("%.0f bytes retained per transfer, want at most 200", perTransfer)
	}
	runtime.KeepAlive(e)
}

// TestExpiryStamps checks how the engine stamps expiries, which a cluster
// does in pulses of its own: at the expiry instant, or just after the
// previous event, in the order of their instants and then of creation;
// requests released by a read or by the next create get the same stamps,
// and a create's own events come after the expiries it released.
func TestExpiryStamps(t *testing.T) {
	run := func(reads bool) ([]tb.ChangeEvent, []tb.CreateTransferResult) {
		f, e, clock := engineFixture(t)
		acc := f.accounts(0, 0)
		var res []tb.CreateTransferResult
		// p1 (2 s) and p2 (1 s, created 1 s later) expire at the same instant,
		// from two timeouts' queues; p3 (1 s) 1 ns later.
		res = append(res, f.must(f.pending(acc[0], acc[1], 1, 2))...)
		clock.Set(time.Unix(0, int64(res[0].Timestamp+1e9-1)))
		res = append(res, f.must(f.pending(acc[0], acc[1], 2, 1), f.pending(acc[0], acc[1], 3, 1))...)
		clock.Set(time.Unix(0, int64(res[0].Timestamp+2e9-1)))
		if reads {
			f.lookupAccount(acc[0]) // stamped p1's instant - 1: releases nothing
			f.lookupAccount(acc[0]) // stamped p1's instant: releases p1 and p2
		}
		// Stamped at the instant: its first timestamp is p3's instant.
		res = append(res, f.must(f.transfer(acc[0], acc[1], 4))...)
		got, err := e.GetChangeEvents(tb.ChangeEventsFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return got, res
	}
	events, res := run(false)
	at := res[0].Timestamp + 2e9
	var got []string
	for _, ev := range events {
		got = append(got, fmt.Sprintf("%v %d @%+d", ev.Type, lo(ev.TransferAmount), int64(ev.Timestamp-at)))
	}
	want := []string{
		fmt.Sprintf("ChangeEventTwoPhasePending 1 @%+d", -2_000_000_000),
		fmt.Sprintf("ChangeEventTwoPhasePending 2 @%+d", int64(res[1].Timestamp-at)),
		fmt.Sprintf("ChangeEventTwoPhasePending 3 @%+d", int64(res[2].Timestamp-at)),
		"ChangeEventTwoPhaseExpired 1 @+0",
		"ChangeEventTwoPhaseExpired 2 @+1",
		"ChangeEventTwoPhaseExpired 3 @+2",
		"ChangeEventSinglePhase 4 @+3",
	}
	if res[2].Timestamp+1e9 != at+1 {
		t.Fatalf("setup: p3 expires at %d, want %d", res[2].Timestamp+1e9, at+1)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("change events:\n%v\nwant\n%v", got, want)
	}
	if r := res[3].Timestamp; r != at+3 {
		t.Fatalf("transfer after the expiries stamped %d, want %d", r, at+3)
	}
	// The same with reads that release p1 and p2 first (IDs aside).
	withReads, res2 := run(true)
	strip := func(events []tb.ChangeEvent) string {
		for i := range events {
			events[i].TransferID, events[i].DebitAccountID, events[i].CreditAccountID = tb.Uint128{}, tb.Uint128{}, tb.Uint128{}
		}
		return fmt.Sprint(events)
	}
	if a, b := strip(withReads), strip(events); a != b || fmt.Sprint(res2) != fmt.Sprint(res) {
		t.Fatalf("with reads releasing the expiries first:\n%v\nwithout:\n%v", a, b)
	}
}
