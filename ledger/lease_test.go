package ledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// Leases keep to their stated bound: at most the limit in any interval of
// length W−τ, and at most limit + P×K in any window W.
func TestLeasesPropertyBound(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		const limit, maxUnits = 400, 20
		w, tau := 2*time.Second, 100*time.Millisecond
		r := ledger.Resource{Name: "lease", Ledger: b.NewLedger(), Kind: ledger.KindBytes, Window: w, DefaultLimit: limit, Lazy: true}
		cfg := ledger.Leases{Lifetime: tau, MaxUnits: maxUnits}
		clients := []*ledger.Client{
			ledger.New(b.Client, ledger.WithLeases(cfg)),
			ledger.New(b.Client, ledger.WithLeases(cfg)),
			ledger.New(b.Client, ledger.WithCoalescing(0)),
		}
		const leasing = 2 // P: processes that take leases
		if err := clients[0].CreateResource(ctx, r); err != nil {
			t.Fatal(err)
		}
		rounds := 30
		if b.Real {
			rounds = 8
		}
		admitted, denied := hammer(t, b, clients, r, "hot", load{rounds: rounds, callers: 30, calls: 8, maxAmount: 3, pause: [2]int{20, 220}})
		if len(admitted) == 0 || denied == 0 {
			t.Fatalf("%d admitted, %d denied: the test must see both", len(admitted), denied)
		}
		if got := maxInWindow(admitted, w-tau); got > limit {
			t.Fatalf("%d units admitted within W−τ = %v, limit %d", got, w-tau, limit)
		}
		if got := maxInWindow(admitted, w); got > limit+leasing*maxUnits {
			t.Fatalf("%d units admitted within W = %v, bound %d", got, w, limit+leasing*maxUnits)
		}
		t.Logf("%d admitted, %d denied; most in W: %d, in W−τ: %d", len(admitted), denied, maxInWindow(admitted, w), maxInWindow(admitted, w-tau))
	})
}

// A hot user is served mostly from leases: few transfers per decision, and
// unused units come back when a lease ends.
func TestLeasesHotUser(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		tau := 200 * time.Millisecond
		c := ledger.New(b.Client, ledger.WithLeases(ledger.Leases{Lifetime: tau, MaxUnits: 500}))
		r := ledger.Resource{Name: "hot", Ledger: b.NewLedger(), Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 100000, Lazy: true}
		if err := c.CreateResource(ctx, r); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		allowed := 0
		for g := 0; g < 32; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 100; i++ {
					d, err := c.Acquire(ctx, r, ledger.Request{User: "hot", Amount: 1})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if d.Allowed {
						allowed++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		sent := c.Stats().CreateTransfers.Events
		if allowed != 3200 {
			t.Fatalf("allowed %d of 3200", allowed)
		}
		if sent*10 > uint64(allowed) {
			t.Fatalf("%d transfers for %d decisions: leases do not pay off", sent, allowed)
		}
		// Unused lease units come back when the lease ends.
		b.Advance(t, tau+time.Millisecond)
		if _, err := c.Acquire(ctx, r, ledger.Request{User: "hot", Amount: 1}); err != nil { // ends the old lease
			t.Fatal(err)
		}
		b.Advance(t, tau+time.Millisecond)
		deadline := time.Now().Add(2 * time.Second)
		for {
			u := inspect(t, c, r, "hot")
			if u.InFlight == 3201 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Inspect = %+v, want exactly the 3201 admitted units in flight", u)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%d transfers for %d decisions", sent, allowed)
	})
}

// A lease of exactly what a call asks is an ordinary pending transfer: it
// takes the whole amount or is denied, and no lookup of the transfer is
// needed to learn which. Coalescing does the same for a lone caller.
func TestExactSizeLeaseAndLoneCallerTakeAllOrNothing(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		for _, opt := range []struct {
			name string
			opt  ledger.Option
		}{
			{"leases", ledger.WithLeases(ledger.Leases{Lifetime: time.Minute, MaxUnits: 1})},
			{"coalescing", ledger.WithCoalescing(0)},
		} {
			t.Run(opt.name, func(t *testing.T) {
				c := ledger.New(b.Client, opt.opt)
				r := ledger.Resource{Name: "exact", Ledger: b.NewLedger(), Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 3, Lazy: true}
				if err := c.CreateResource(ctx, r); err != nil {
					t.Fatal(err)
				}
				steps := []struct {
					amount    uint64
					allowed   bool
					remaining uint64
				}{{2, true, 1}, {2, false, 1}, {1, true, 0}}
				for i, s := range steps {
					d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: s.amount})
					if err != nil {
						t.Fatal(err)
					}
					if d.Allowed != s.allowed || d.Remaining != s.remaining {
						t.Fatalf("step %d: Acquire(%d) = %+v, want allowed %v, remaining %d", i, s.amount, d, s.allowed, s.remaining)
					}
					if !d.Allowed && d.RetryAfter <= 0 {
						t.Fatalf("step %d: denial without a RetryAfter: %+v", i, d)
					}
				}
				if u := inspect(t, c, r, "u"); u.InFlight != 3 {
					t.Fatalf("Inspect = %+v, want the 3 admitted units in flight", u)
				}
				if n := c.Stats().LookupTransfers; n.Events != 0 || n.Requests != 0 {
					t.Fatalf("lookup_transfers: %+v, want no request", n)
				}
			})
		}
	})
}

// A renewal whose answer never came, under FailOpen, is admitted as
// unavailable but is not a lease: the calls after it are not admitted from
// units the cluster never checked.
func TestLeaseNotTakenWithoutAnAnswer(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		const limit = 20
		c := ledger.New(b.Client, ledger.WithUnavailable(ledger.FailOpen),
			ledger.WithLeases(ledger.Leases{Lifetime: time.Hour, MaxUnits: 5}))
		r := ledger.Resource{Name: "r", Ledger: b.NewLedger(), Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: limit, Lazy: true}
		if err := c.CreateResource(ctx, r); err != nil {
			t.Fatal(err)
		}
		lost, cancel := context.WithCancel(ctx)
		cancel() // a call made with it gets no answer: nothing is sent
		admitted, unavailable := 0, 0
		for i := range 2 * limit {
			cx := ctx
			if i == 6 { // the first lease (1 unit) and the second (5) are used: a renewal
				cx = lost
			}
			d, err := c.Acquire(cx, r, ledger.Request{User: "u", Amount: 1})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case d.Allowed && d.Reason == ledger.Admitted:
				admitted++
			case d.Reason == ledger.Unavailable:
				unavailable++
				if d.Remaining > d.Limit {
					t.Fatalf("call %d: unavailable decision %+v says more remain than the limit", i, d)
				}
			}
		}
		u, err := c.Inspect(ctx, r, "u")
		if err != nil {
			t.Fatal(err)
		}
		if unavailable != 1 || admitted > limit || u.InFlight > limit {
			t.Fatalf("%d admitted and %d unavailable of %d calls, %d in flight: want 1 unavailable, at most %d admitted",
				admitted, unavailable, 2*limit, u.InFlight, limit)
		}
	})
}

// A drained user's calls count as demand even when they are denied from a
// published denial, without the user's lock: the lease taken when units
// return is sized by them.
func TestLeaseSizedByDeniedDemand(t *testing.T) {
	eachInTime(t, 2*time.Second, time.Minute, leaseSizedByDeniedDemand)
}

// leaseSizedByDeniedDemand runs the scenario with window w; false: the
// work outlasted it.
func leaseSizedByDeniedDemand(t *testing.T, b *testenv.Backend, w time.Duration) bool {
	t.Helper()
	const limit, maxUnits, denials = 10, 5, 200
	c := ledger.New(b.Client, ledger.WithLeases(ledger.Leases{Lifetime: w / 2, MaxUnits: maxUnits}))
	r := ledger.Resource{Name: "r", Ledger: b.NewLedger(), Kind: ledger.KindRequests, Window: w, DefaultLimit: limit, Lazy: true}
	if err := c.CreateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	taken := acquire(t, c, r, "u", limit) // a lease of exactly the call: the user is drained
	if !taken.Allowed {
		t.Fatalf("Acquire(%d) = %+v", limit, taken)
	}
	if d := acquire(t, c, r, "u", 1); d.Allowed { // the cluster confirms the view's denial
		t.Fatalf("Acquire(1) when drained = %+v", d)
	}
	before := c.Stats()
	var last ledger.Decision
	for range denials {
		if last = acquire(t, c, r, "u", 1); last.Allowed {
			t.Fatalf("Acquire(1) when drained = %+v", last)
		}
	}
	if !testenv.Within(taken.Timestamp, last.Timestamp, w) {
		return false
	}
	after := c.Stats()
	if n := after.LocalDenials - before.LocalDenials; n != denials || after.CreateTransfers != before.CreateTransfers {
		t.Fatalf("%d of %d denials local, creates %+v then %+v", n, denials, before.CreateTransfers, after.CreateTransfers)
	}
	// The units return; demand was 2+denials units in about a window,
	// so the next lease is as large as allowed: maxUnits, of which the
	// calls after the first use the rest without a request.
	b.Advance(t, w+time.Millisecond)
	if b.Real {
		time.Sleep(300 * time.Millisecond)
	}
	if d := acquire(t, c, r, "u", 1); !d.Allowed {
		t.Fatalf("Acquire(1) when the units returned = %+v", d)
	}
	before = c.Stats()
	for i := 1; i < maxUnits; i++ {
		if d := acquire(t, c, r, "u", 1); !d.Allowed {
			t.Fatalf("Acquire(1) from the lease = %+v", d)
		}
	}
	after = c.Stats()
	if n := after.LeaseAdmissions - before.LeaseAdmissions; n != maxUnits-1 || after.CreateTransfers.Requests != before.CreateTransfers.Requests {
		t.Fatalf("%d of %d calls admitted from the lease, create requests %d then %d: the lease was not sized by the denied demand",
			n, maxUnits-1, before.CreateTransfers.Requests, after.CreateTransfers.Requests)
	}
	return true
}

// A lease's units that no call has yet count as remaining, in the decision
// that renewed it and in those it serves: every decision says what a call
// without leases would.
func TestLeaseDecisionsCountItsUnusedUnitsRemaining(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		const limit, maxUnits = 10, 5
		c := ledger.New(b.Client, ledger.WithLeases(ledger.Leases{Lifetime: time.Hour, MaxUnits: maxUnits}))
		r := ledger.Resource{Name: "r", Ledger: b.NewLedger(), Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: limit, Lazy: true}
		if err := c.CreateResource(ctx, r); err != nil {
			t.Fatal(err)
		}
		for i := range limit + 1 {
			d := acquire(t, c, r, "u", 1)
			if want := uint64(limit - min(i+1, limit)); d.Allowed != (i < limit) || d.Remaining != want {
				t.Fatalf("call %d: Acquire(1) = %+v, want allowed %v, remaining %d", i, d, i < limit, want)
			}
		}
		// The first lease is of the first call's unit, the next of maxUnits.
		if n := c.Stats().LeaseAdmissions; n < maxUnits-1 {
			t.Fatalf("%d calls admitted from leases, want at least %d", n, maxUnits-1)
		}
	})
}
