package simnet

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

func TestRequestSizeLimits(t *testing.T) {
	for _, c := range []struct {
		op                  Op
		limit               int
		wantEvent, wantRes  int
		eventSize, resSize  int
		batchable, multiple bool
	}{
		{CreateTransfers, ProductionBatchSizeLimit, 8189, 8189, 128, 16, true, true},
		{CreateAccounts, ProductionBatchSizeLimit, 8189, 8189, 128, 16, true, true},
		{LookupAccounts, ProductionBatchSizeLimit, 8189, 8189, 16, 128, true, true},
		{LookupTransfers, ProductionBatchSizeLimit, 8189, 8189, 16, 128, true, true},
		{CreateTransfers, DevelopmentBatchSizeLimit, 253, 253, 128, 16, true, true},
		{LookupAccounts, DevelopmentBatchSizeLimit, 2031, 2031, 16, 128, true, true},
		{GetAccountTransfers, DevelopmentBatchSizeLimit, 254, 8189, 128, 128, false, true},
		{GetAccountTransfers, ProductionBatchSizeLimit, 8189, 8189, 128, 128, false, true},
		{GetAccountBalances, ProductionBatchSizeLimit, 8189, 8189, 128, 128, false, true},
		{QueryTransfers, ProductionBatchSizeLimit, 8189, 8189, 64, 128, false, true},
	} {
		s := shapes[c.op]
		if s.event != c.eventSize || s.result != c.resSize || s.batchable != c.batchable || s.multiBatch != c.multiple {
			t.Errorf("shapes[%v] = %+v, want event %d result %d batchable %v multi-batch %v", c.op, s, c.eventSize, c.resSize, c.batchable, c.multiple)
		}
		if got := s.eventMax(c.limit); got != c.wantEvent && c.batchable {
			t.Errorf("%v.eventMax(%d) = %d, want %d", c.op, c.limit, got, c.wantEvent)
		}
		if got := s.resultMax(c.limit); got != c.wantRes {
			t.Errorf("%v.resultMax(%d) = %d, want %d", c.op, c.limit, got, c.wantRes)
		}
	}
	if s := shapes[GetChangeEvents]; s.multiBatch {
		t.Errorf("get_change_events is multi-batch; 0.17.9 sends it alone")
	}
	// Many small calls: the trailer grows by 2 bytes a batch.
	s := shapes[CreateTransfers]
	if !s.fits(ProductionBatchSizeLimit, 8063, 8063, 8063) || s.fits(ProductionBatchSizeLimit, 8064, 8064, 8064) {
		t.Errorf("8063 single-transfer calls should fit one request, 8064 not")
	}
	if got := shapes[GetAccountTransfers].queryResults(1 << 30); got != 8189 {
		t.Errorf("queryResults(2^30) = %d, want the client's cap 8189", got)
	}
}

func TestOpString(t *testing.T) {
	if got := CreateTransfers.String(); got != "create_transfers" {
		t.Errorf("CreateTransfers.String() = %q", got)
	}
	if got := Op(200).String(); got != "Op(200)" {
		t.Errorf("Op(200).String() = %q", got)
	}
}

// inFlight starts f in a goroutine and returns a channel closed when it returns.
func inFlight(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

// waitCalls waits until c has accepted n calls of op.
func waitCalls(t *testing.T, c *Client, op Op, n uint64) {
	t.Helper()
	eventually(t, "calls waiting", func() bool { return c.Stats().Ops[op].Calls >= n })
}

func TestConcurrentCallsShareTheNextRequest(t *testing.T) {
	f := newLedger(t, 6, 10)
	clk := newFakeClock(false)
	rec := &recorder{Client: f.e}
	c := New(rec, flat(time.Millisecond), withClock(clk))
	defer c.Close()

	res := make([][]tb.CreateTransferResult, 6)
	var wg sync.WaitGroup
	send := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.CreateTransfers([]tb.Transfer{f.take(i)})
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
			res[i] = r
		}()
	}
	send(0)
	eventually(t, "the first request in flight", func() bool { return clk.sleeping() == 1 })
	for i := 1; i < 6; i++ {
		send(i)
	}
	waitCalls(t, c, CreateTransfers, 6)
	clk.Advance(time.Millisecond)
	eventually(t, "the second request in flight", func() bool { return clk.sleeping() == 1 })
	clk.Advance(time.Millisecond)
	wg.Wait()

	if got, want := c.Stats().Ops[CreateTransfers], (OpStats{Calls: 6, Requests: 2, Events: 6}); got != want {
		t.Errorf("stats = %+v, want %+v", got, want)
	}
	if got := rec.seen(); len(got) != 6 || slices.ContainsFunc(got, func(s string) bool { return s != "create:1" }) {
		t.Errorf("engine saw %v, want each call applied on its own", got)
	}
	for i, r := range res {
		if len(r) != 1 || r[0].Status != tb.TransferCreated || r[0].Timestamp == 0 {
			t.Errorf("call %d got %+v, want its own created result", i, r)
		}
	}
	if got, want := c.Stats().Busy, 2*time.Millisecond; got != want {
		t.Errorf("busy %v, want %v", got, want)
	}
}

func TestRequestsLeaveInOrderAndOperationsNeverMix(t *testing.T) {
	f := newLedger(t, 3, 10)
	clk := newFakeClock(false)
	rec := &recorder{Client: f.e}
	c := New(rec, flat(time.Millisecond), withClock(clk))
	defer c.Close()

	var dones []<-chan struct{}
	create := func(i int) {
		dones = append(dones, inFlight(func() { c.CreateTransfers([]tb.Transfer{f.take(i)}) }))
	}
	look := func(n int) {
		dones = append(dones, inFlight(func() { c.LookupAccounts(f.users[:n]) }))
	}
	create(0)
	eventually(t, "the first request in flight", func() bool { return clk.sleeping() == 1 })
	look(1)
	waitCalls(t, c, LookupAccounts, 1)
	create(1)
	waitCalls(t, c, CreateTransfers, 2)
	look(2)
	waitCalls(t, c, LookupAccounts, 2)
	create(2)
	waitCalls(t, c, CreateTransfers, 3)
	for range 3 {
		eventually(t, "a request in flight", func() bool { return clk.sleeping() == 1 })
		clk.Advance(time.Millisecond)
	}
	for _, d := range dones {
		<-d
	}
	want := []string{"create:1", "lookup:1", "lookup:2", "create:1", "create:1"}
	if got := rec.seen(); !slices.Equal(got, want) {
		t.Errorf("engine saw %v, want %v", got, want)
	}
	st := c.Stats()
	if st.Ops[LookupAccounts].Requests != 1 || st.Ops[CreateTransfers].Requests != 2 || st.Requests() != 3 {
		t.Errorf("stats %+v, want 1 lookup request and 2 create requests", st)
	}
}

func TestCallsThatDoNotFitWaitForTheNextRequest(t *testing.T) {
	f := newLedger(t, 1, 1000)
	clk := newFakeClock(false)
	rec := &recorder{Client: f.e}
	m := flat(time.Millisecond)
	m.BatchSizeLimit = DevelopmentBatchSizeLimit // 253 transfers
	c := New(rec, m, withClock(clk))
	defer c.Close()

	batch := func(n int) []tb.Transfer {
		ts := make([]tb.Transfer, n)
		for i := range ts {
			ts[i] = f.take(0)
		}
		return ts
	}
	if _, err := c.CreateTransfers(batch(254)); !errors.Is(err, tb.ErrTooMuchData) {
		t.Fatalf("254 transfers: %v, want ErrTooMuchData", err)
	}
	if got := c.Stats().Ops[CreateTransfers]; got != (OpStats{}) {
		t.Fatalf("a refused call was counted: %+v", got)
	}
	var dones []<-chan struct{}
	send := func(n int) {
		dones = append(dones, inFlight(func() {
			if _, err := c.CreateTransfers(batch(n)); err != nil {
				t.Errorf("%d transfers: %v", n, err)
			}
		}))
	}
	send(1)
	eventually(t, "the first request in flight", func() bool { return clk.sleeping() == 1 })
	for i, n := range []int{200, 100, 50} {
		send(n)
		waitCalls(t, c, CreateTransfers, uint64(i+2))
	}
	for range 3 {
		eventually(t, "a request in flight", func() bool { return clk.sleeping() == 1 })
		clk.Advance(time.Millisecond)
	}
	for _, d := range dones {
		<-d
	}
	// 50 still fits beside 200 (250 transfers and a 128-byte trailer);
	// 100 does not, and waits for the request after.
	want := []string{"create:1", "create:200", "create:50", "create:100"}
	if got := rec.seen(); !slices.Equal(got, want) {
		t.Errorf("engine saw %v, want %v", got, want)
	}
	if got := c.Stats().Ops[CreateTransfers]; got.Requests != 3 || got.Events != 351 {
		t.Errorf("stats %+v, want 3 requests of 351 transfers", got)
	}
}

func TestQueriesShareRequestsByTheResultsTheyAskFor(t *testing.T) {
	f := newLedger(t, 1, 10)
	clk := newFakeClock(false)
	rec := &recorder{Client: f.e}
	c := New(rec, flat(time.Millisecond), withClock(clk))
	defer c.Close()

	scan := func(limit uint32) <-chan struct{} {
		return inFlight(func() {
			_, err := c.GetAccountTransfers(tb.AccountFilter{AccountID: f.users[0], Limit: limit,
				Flags: tb.AccountFilterFlags{Debits: true, Credits: true}.ToUint32()})
			if err != nil {
				t.Errorf("scan: %v", err)
			}
		})
	}
	var dones []<-chan struct{}
	dones = append(dones, scan(10))
	eventually(t, "the first request in flight", func() bool { return clk.sleeping() == 1 })
	for i, limit := range []uint32{8189, 8189, 10, 10} {
		dones = append(dones, scan(limit))
		waitCalls(t, c, GetAccountTransfers, uint64(i+2))
	}
	for range 4 {
		eventually(t, "a request in flight", func() bool { return clk.sleeping() == 1 })
		clk.Advance(time.Millisecond)
	}
	for _, d := range dones {
		<-d
	}
	// A full page leaves no room: each 8189-result scan is a request of
	// its own; the small ones share one.
	want := []string{"scan:10", "scan:8189", "scan:8189", "scan:10", "scan:10"}
	if got := rec.seen(); !slices.Equal(got, want) {
		t.Errorf("engine saw %v, want %v", got, want)
	}
	if got := c.Stats().Ops[GetAccountTransfers]; got.Requests != 4 || got.Calls != 5 {
		t.Errorf("stats %+v, want 5 calls in 4 requests", got)
	}
}

func TestLinkedChainsStayWithTheirCaller(t *testing.T) {
	f := newLedger(t, 3, 10)
	clk := newFakeClock(false)
	c := New(f.e, flat(time.Millisecond), withClock(clk))
	defer c.Close()

	first := inFlight(func() { c.CreateTransfers([]tb.Transfer{f.take(0)}) })
	eventually(t, "the first request in flight", func() bool { return clk.sleeping() == 1 })
	// Caller A leaves its chain open; caller B's transfer, merged into the
	// same request, must not be swallowed by it.
	open := []tb.Transfer{f.take(1), f.take(1)}
	for i := range open {
		open[i].Flags |= tb.TransferFlags{Linked: true}.ToUint16()
	}
	var resA, resB []tb.CreateTransferResult
	a := inFlight(func() { resA, _ = c.CreateTransfers(open) })
	waitCalls(t, c, CreateTransfers, 2)
	b := inFlight(func() { resB, _ = c.CreateTransfers([]tb.Transfer{f.take(2)}) })
	waitCalls(t, c, CreateTransfers, 3)
	clk.Advance(time.Millisecond)
	eventually(t, "the merged request in flight", func() bool { return clk.sleeping() == 1 })
	clk.Advance(time.Millisecond)
	<-first
	<-a
	<-b

	if got := c.Stats().Ops[CreateTransfers].Requests; got != 2 {
		t.Fatalf("%d requests, want 2 (A and B merged)", got)
	}
	if len(resB) != 1 || resB[0].Status != tb.TransferCreated {
		t.Errorf("B = %+v, want created", resB)
	}
	if len(resA) != 2 || resA[1].Status != tb.TransferLinkedEventChainOpen {
		t.Errorf("A = %+v, want its open chain refused on its own", resA)
	}
}

func TestCostOfARequest(t *testing.T) {
	f := newLedger(t, 1, 2)
	clk := newFakeClock(true) // virtual time: sleeps end at once
	m := Model{RoundTrip: 100 * time.Microsecond}
	m.Ops[CreateTransfers] = Cost{PerRequest: 50 * time.Microsecond, PerEvent: 10 * time.Microsecond, PerFailed: time.Microsecond}
	m.Ops[LookupAccounts] = Cost{PerRequest: 20 * time.Microsecond, PerEvent: 3 * time.Microsecond}
	m.Ops[GetAccountTransfers] = Cost{PerRequest: 30 * time.Microsecond, PerEvent: 5 * time.Microsecond}
	c := New(f.e, m, withClock(clk))
	defer c.Close()

	t0 := clk.Now()
	step := func(what string, want time.Duration, call func() error) {
		t.Helper()
		before := clk.Now()
		if err := call(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := clk.Now().Sub(before); got != want {
			t.Errorf("%s took %v, want %v", what, got, want)
		}
	}
	// Two created, one exceeds the user's credits.
	step("create 3", 100*time.Microsecond+50*time.Microsecond+2*10*time.Microsecond+time.Microsecond, func() error {
		_, err := c.CreateTransfers([]tb.Transfer{f.take(0), f.take(0), f.take(0)})
		return err
	})
	step("lookup 2", 100*time.Microsecond+20*time.Microsecond+2*3*time.Microsecond, func() error {
		_, err := c.LookupAccounts([]tb.Uint128{f.op, f.users[0]})
		return err
	})
	step("scan returning 2", 100*time.Microsecond+30*time.Microsecond+2*5*time.Microsecond, func() error {
		_, err := c.GetAccountTransfers(tb.AccountFilter{AccountID: f.users[0], Limit: 100,
			Flags: tb.AccountFilterFlags{Debits: true}.ToUint32()})
		return err
	})
	if got, want := c.Stats().Busy, clk.Now().Sub(t0); got != want {
		t.Errorf("busy %v, want %v", got, want)
	}
}

func TestRequestEndsAreAbsoluteDeadlines(t *testing.T) {
	f := newLedger(t, 2, 10)
	clk := newFakeClock(false)
	c := New(f.e, flat(time.Millisecond), withClock(clk))
	defer c.Close()

	a := inFlight(func() { c.CreateTransfers([]tb.Transfer{f.take(0)}) })
	eventually(t, "A in flight", func() bool { return clk.sleeping() == 1 })
	b := inFlight(func() { c.CreateTransfers([]tb.Transfer{f.take(1)}) })
	waitCalls(t, c, CreateTransfers, 2)
	// The process wakes up half a millisecond late for A's end: B still
	// left when A ended, and ends one millisecond after that.
	clk.Advance(1500 * time.Microsecond)
	<-a
	eventually(t, "B in flight", func() bool { return clk.sleeping() == 1 })
	clk.Advance(500 * time.Microsecond)
	<-b
	if got := c.Stats().Busy; got != 2*time.Millisecond {
		t.Errorf("busy %v, want 2ms: a late wake-up must not delay the next request", got)
	}
}

// slowEngine advances a virtual clock while it applies a call.
type slowEngine struct {
	tb.Client
	clk *fakeClock
	d   time.Duration
}

func (s *slowEngine) CreateTransfers(ts []tb.Transfer) ([]tb.CreateTransferResult, error) {
	s.clk.Advance(s.d)
	return s.Client.CreateTransfers(ts)
}

func TestASlowWrappedClientAddsNothing(t *testing.T) {
	f := newLedger(t, 1, 10)
	clk := newFakeClock(true)
	c := New(&slowEngine{Client: f.e, clk: clk, d: 5 * time.Millisecond}, flat(time.Millisecond), withClock(clk))
	defer c.Close()
	t0 := clk.Now()
	if _, err := c.CreateTransfers([]tb.Transfer{f.take(0)}); err != nil {
		t.Fatal(err)
	}
	if got := clk.Now().Sub(t0); got != 5*time.Millisecond {
		t.Errorf("took %v, want 5ms: the engine's own time, not 5ms + 1ms", got)
	}
	if got := c.Stats().Overran; got != 1 {
		t.Errorf("overran %d, want 1", got)
	}
}

func TestStallsAreSeededAndAverageTheirMean(t *testing.T) {
	f := newLedger(t, 1, 1)
	busy := func(seed uint64) time.Duration {
		clk := newFakeClock(true)
		m := Model{RoundTrip: 100 * time.Microsecond, StallProb: 0.25, StallMean: 2 * time.Millisecond}
		c := New(f.e, m, withClock(clk), WithSeed(seed))
		defer c.Close()
		for range 4000 {
			if _, err := c.LookupAccounts(f.users); err != nil {
				t.Fatal(err)
			}
		}
		return c.Stats().Busy
	}
	a, b, other := busy(7), busy(7), busy(8)
	if a != b {
		t.Errorf("seed 7 gave %v then %v: want the same", a, b)
	}
	if a == other {
		t.Errorf("seeds 7 and 8 both gave %v", a)
	}
	want := 4000 * (100*time.Microsecond + 500*time.Microsecond) // 0.25 × 2ms of stall on average
	if a < want*85/100 || a > want*115/100 {
		t.Errorf("busy %v, want about %v", a, want)
	}
}

// TestSystemClockKeepsTime checks that modelled time holds on the real
// clock: a lone caller's calls are not rounded up to Go's millisecond timer,
// and a busy pipeline does not accumulate late wake-ups. Time is never
// shorter than modelled; a machine busy with other work can make it longer,
// so each part has three tries to come within the bound, which a clock that
// rounds every wake-up up to a millisecond misses on all three.
func TestSystemClockKeepsTime(t *testing.T) {
	if raceEnabled {
		t.Skip("-race slows the model's own work past what the bounds allow: checked without it (go test -short runs it)")
	}
	f := newLedger(t, 8, 1_000_000)
	const cost = 400 * time.Microsecond
	c := New(f.e, flat(cost))
	defer c.Close()

	// tries runs part until it takes at most its bound hi, three times at
	// most. A try during which the machine's own timers fired late (as a
	// clock that rounds up would make them) cannot tell: if every try is
	// such, the part is skipped, saying so.
	tries := func(name string, part func() (lo, hi time.Duration)) {
		t.Helper()
		var took []time.Duration
		var hi time.Duration
		busy := 0
		for range 3 {
			stop := make(chan time.Duration)
			go timerLateness(stop)
			t0 := time.Now()
			var lo time.Duration
			lo, hi = part()
			got := time.Since(t0)
			stop <- 0
			late, worst := <-stop, <-stop
			if got < lo {
				t.Errorf("%s: %v, shorter than the %v modelled", name, got, lo)
				return
			}
			if got <= hi {
				return
			}
			if late > 200*time.Microsecond || worst > 5*time.Millisecond {
				busy++
			}
			took = append(took, got)
		}
		if busy == 3 {
			t.Logf("%s: %v, over %v, with this machine's timers firing late: too busy to tell", name, took, hi)
			return
		}
		t.Errorf("%s: %v, want at most %v once in three tries", name, took, hi)
	}

	tries("one caller, 50 calls", func() (lo, hi time.Duration) {
		for range 50 {
			if _, err := c.CreateTransfers([]tb.Transfer{f.take(0)}); err != nil {
				t.Fatal(err)
			}
		}
		return 50 * cost, 50*cost*3/2 + 20*time.Millisecond
	})

	tries("8 callers, 50 calls each, back to back", func() (lo, hi time.Duration) {
		before := c.Stats().Ops[CreateTransfers].Requests
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for range 50 {
					if _, err := c.CreateTransfers([]tb.Transfer{f.take(g)}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		reqs := c.Stats().Ops[CreateTransfers].Requests - before
		if reqs >= 400 {
			t.Errorf("%d requests for 400 calls of 8 callers: calls were not merged", reqs)
		}
		return time.Duration(reqs) * cost, time.Duration(reqs)*cost*13/10 + 20*time.Millisecond
	})
}

func TestConcurrentUseIsExact(t *testing.T) {
	f := newLedger(t, 1, 1000)
	c := New(f.e, Model{})
	defer c.Close()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				res, err := c.CreateTransfers([]tb.Transfer{f.take(0)})
				if err != nil {
					t.Error(err)
					return
				}
				if res[0].Status == tb.TransferCreated {
					admitted.Add(1)
				}
				if _, err := c.LookupAccounts(f.users); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got != 1000 {
		t.Errorf("admitted %d of 1600 against a limit of 1000", got)
	}
	st := c.Stats()
	if st.Ops[CreateTransfers].Calls != 1600 || st.Ops[CreateTransfers].Events != 1600 || st.Ops[LookupAccounts].Calls != 1600 {
		t.Errorf("stats %+v", st)
	}
}

func TestCompactionPauses(t *testing.T) {
	f := newLedger(t, 1, 100)
	clk := newFakeClock(true)
	m := Model{RoundTrip: 100 * time.Microsecond, CompactionPerEvent: time.Millisecond, CompactionPause: 3 * time.Millisecond}
	c := New(f.e, m, withClock(clk))
	defer c.Close()
	var took []time.Duration
	for range 7 {
		before := clk.Now()
		if _, err := c.CreateTransfers([]tb.Transfer{f.take(0)}); err != nil {
			t.Fatal(err)
		}
		took = append(took, clk.Now().Sub(before))
	}
	// Lookups owe nothing, but pay a pause that is due.
	before := clk.Now()
	if _, err := c.LookupAccounts(f.users); err != nil {
		t.Fatal(err)
	}
	took = append(took, clk.Now().Sub(before))
	rt, pause := 100*time.Microsecond, 3100*time.Microsecond
	want := []time.Duration{rt, rt, pause, rt, rt, pause, rt, rt}
	if !slices.Equal(took, want) {
		t.Errorf("took %v, want %v: a pause every third created transfer", took, want)
	}
}

// timerLateness sleeps a millisecond at a time until told to stop (a value
// on stop), then sends how late the sleeps woke up on average, then the
// latest.
func timerLateness(stop chan time.Duration) {
	var late, worst time.Duration
	var n int64
	for {
		select {
		case <-stop:
			stop <- late / time.Duration(max(n, 1))
			stop <- worst
			return
		default:
		}
		t0 := time.Now()
		time.Sleep(time.Millisecond)
		l := time.Since(t0) - time.Millisecond
		late, worst, n = late+l, max(worst, l), n+1
	}
}
