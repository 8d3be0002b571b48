package ledger_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/testenv"
)

func history(t *testing.T, c *ledger.Client, r ledger.Resource, user string, from, to time.Time, max int) []ledger.Admission {
	t.Helper()
	h, err := c.History(ctx, r, user, from, to, max)
	if err != nil {
		t.Fatalf("History(%s, %s) error = %v", r.Name, user, err)
	}
	return h
}

// admissionString is what a test compares of an admission: everything
// but the times.
func admissionString(a ledger.Admission) string {
	s := fmt.Sprintf("{%d ref %d %s", a.Amount, a.Ref, a.End)
	if a.Kept != nil {
		s += fmt.Sprintf(", kept %d %s", a.Kept.Amount, a.Kept.End)
	}
	if p := a.Payment; p != nil {
		s += fmt.Sprintf(", paid %d to %q", p.Amount, p.ToKey)
	}
	return s + "}"
}

func checkHistory(t *testing.T, h []ledger.Admission, want ...string) {
	t.Helper()
	got := make([]string, len(h))
	for i, a := range h {
		got[i] = admissionString(a)
		if i > 0 && !a.Taken.Before(h[i-1].Taken) {
			t.Errorf("History[%d] taken at %v, not before History[%d] at %v: want the newest first", i, a.Taken, i-1, h[i-1].Taken)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("History = %v, want %v", got, want)
	}
}

// History lists each admission with its ID, amount, ref and how it ended,
// the newest first; a time span and max select which.
func TestHistoryEnds(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 10})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 10}, ledger.UserLimit{Key: "idle", Limit: 10}); err != nil {
			t.Fatal(err)
		}
		d1, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 2, Ref: 7})
		if err != nil || !d1.Allowed {
			t.Fatalf("Acquire = %+v, %v", d1, err)
		}
		committed := reserve(t, c, r, "u", 1)
		if err := committed.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		cancelled := reserve(t, c, r, "u", 3)
		if err := cancelled.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		id := ledger.KeyID(b.Key("order-1"))
		d2, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1, ID: id, Ref: 8})
		if err != nil || !d2.Allowed || d2.ID != id {
			t.Fatalf("Acquire under %s = %+v, %v", id, d2, err)
		}
		h := history(t, c, r, "u", time.Time{}, time.Time{}, 0)
		checkHistory(t, h, "{1 ref 8 in flight}", "{3 ref 0 cancelled}", "{1 ref 0 committed, kept 1 in flight}", "{2 ref 7 in flight}")
		for i, want := range []ledger.ID{id, cancelled.Decision().ID, committed.Decision().ID, d1.ID} {
			if h[i].ID != want || h[i].Hold != want {
				t.Errorf("History[%d] = ID %s, hold %s; want both %s", i, h[i].ID, h[i].Hold, want)
			}
		}
		if got := uint64(h[0].Taken.UnixNano()); got != d2.Timestamp {
			t.Errorf("History[0] taken at %d, the decision's timestamp is %d", got, d2.Timestamp)
		}
		if !h[0].Ended.Equal(h[0].Taken.Add(time.Hour)) || !h[1].Ended.After(h[1].Taken) || !h[1].Ended.Before(h[0].Taken) {
			t.Errorf("History ends: %v after %v (want one window), cancelled at %v after %v", h[0].Ended, h[0].Taken, h[1].Ended, h[1].Taken)
		}
		checkHistory(t, history(t, c, r, "u", time.Time{}, time.Time{}, 2), "{1 ref 8 in flight}", "{3 ref 0 cancelled}")
		checkHistory(t, history(t, c, r, "u", h[2].Taken, h[1].Taken, 0), "{3 ref 0 cancelled}", "{1 ref 0 committed, kept 1 in flight}")
		checkHistory(t, history(t, c, r, "u", h[2].Taken.Add(time.Nanosecond), h[1].Taken.Add(-time.Nanosecond), 0))
		checkHistory(t, history(t, c, r, "u", h[0].Taken, h[3].Taken, 0))
		checkHistory(t, history(t, c, r, "idle", time.Time{}, time.Time{}, 0))
		if _, err := c.History(ctx, r, "nobody", time.Time{}, time.Time{}, 0); err == nil {
			t.Error("History of an unknown user: no error")
		}
		if _, err := c.History(ctx, r, " u", time.Time{}, time.Time{}, 0); err == nil {
			t.Error(`History of " u": no error (the key rule refuses it)`)
		}
	})
}

func reserve(t *testing.T, c *ledger.Client, r ledger.Resource, user string, n uint64) *ledger.Reservation {
	t.Helper()
	rv, err := c.Reserve(ctx, r, ledger.Request{User: user, Amount: n})
	if err != nil || !rv.OK() {
		t.Fatalf("Reserve(%s, %d) = %+v, %v", user, n, rv, err)
	}
	return rv
}

// Units that returned by expiring say so, one window after they were taken.
func TestHistoryExpired(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		w := time.Second
		c, r := setup(t, b, ledger.Resource{Window: w, DefaultLimit: 5, Lazy: true})
		d := acquire(t, c, r, "u", 2)
		b.Advance(t, w+time.Millisecond)
		if b.Real {
			time.Sleep(50 * time.Millisecond) // the local clock may trail the cluster's a little
		}
		h := history(t, c, r, "u", time.Time{}, time.Time{}, 0)
		checkHistory(t, h, "{2 ref 0 expired}")
		if h[0].ID != d.ID || h[0].Ended.Sub(h[0].Taken) != w {
			t.Fatalf("History = %+v, want %s ended one window after it was taken", h[0], d.ID)
		}
	})
}

// A request admitted by a later attempt under its ID is listed under that
// ID, as are the later holds of an AcquireAll chain: the name Decision.ID
// gave.
func TestHistoryRequestIDs(t *testing.T) {
	eachInTime(t, 2*time.Second, time.Minute, func(t *testing.T, b *testenv.Backend, w time.Duration) bool {
		c, r := setup(t, b, ledger.Resource{Window: w, DefaultLimit: 2})
		_, other := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 5, Lazy: true})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 2}); err != nil {
			t.Fatal(err)
		}
		first := acquire(t, c, r, "u", 2)
		id := ledger.KeyID(b.Key("order-7"))
		d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1, ID: id})
		if err != nil || d.Allowed {
			t.Fatalf("Acquire under %s with nothing left = %+v, %v", id, d, err)
		}
		if !testenv.Within(first.Timestamp, d.Timestamp, w) {
			return false
		}
		b.Advance(t, time.Duration(first.Timestamp+uint64(w)-uint64(b.Now().UnixNano()))+time.Millisecond)
		if b.Real {
			time.Sleep(300 * time.Millisecond)
		}
		chain := ledger.KeyID(b.Key("chain-1"))
		ds, err := c.AcquireAll(ctx, []ledger.Part{
			{Resource: r, Request: ledger.Request{User: "u", Amount: 1, ID: id}},
		})
		if err != nil || !ds[0].Allowed || ds[0].ID != id {
			t.Fatalf("Acquire under %s after the units returned = %+v, %v", id, ds, err)
		}
		ds, err = c.AcquireAll(ctx, []ledger.Part{
			{Resource: other, Request: ledger.Request{User: "u", Amount: 1, ID: chain}},
			{Resource: r, Request: ledger.Request{User: "u", Amount: 1}},
		})
		if err != nil || !ds[0].Allowed {
			t.Fatalf("AcquireAll under %s = %+v, %v", chain, ds, err)
		}
		h := history(t, c, r, "u", time.Time{}, time.Time{}, 0)
		checkHistory(t, h, "{1 ref 0 in flight}", "{1 ref 0 in flight}", "{2 ref 0 expired}")
		if h[0].ID != chain || h[0].Hold == chain || h[1].ID != id || h[1].Hold == id || h[2].ID != first.ID {
			t.Fatalf("History IDs = %s (hold %s), %s (hold %s), %s; want %s (a chain's later hold), %s (a later attempt), %s",
				h[0].ID, h[0].Hold, h[1].ID, h[1].Hold, h[2].ID, chain, id, first.ID)
		}
		if ho := history(t, c, other, "u", time.Time{}, time.Time{}, 0); len(ho) != 1 || ho[0].ID != chain {
			t.Fatalf("History on the chain's first resource = %+v, want one admission named %s", ho, chain)
		}
		return true
	})
}

// A lease that ends with units unused gives them back: its hold is voided
// and what it handed out is held again, linked. History shows one
// admission, cancelled, with the units it kept.
func TestHistoryLeaseGiveBack(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		tau := 300 * time.Millisecond
		_, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 100, Lazy: true})
		c := ledger.New(b.Client, ledger.WithLeases(ledger.Leases{Lifetime: tau, MaxUnits: 3}))
		acquire(t, c, r, "u", 1) // a cold user's lease: exactly what it asks
		acquire(t, c, r, "u", 1) // demand: a lease of up to 3, one used
		h := history(t, c, r, "u", time.Time{}, time.Time{}, 0)
		if len(h) != 2 || h[0].Amount < 2 {
			t.Fatalf("History after two calls = %v; want a lease of more than one unit (the calls were %v apart)", h, h[len(h)-1].Taken.Sub(h[0].Taken))
		}
		lease := h[0].Amount
		b.Advance(t, tau+50*time.Millisecond)
		deadline := time.Now().Add(10 * time.Second)
		for h[0].End != ledger.Cancelled && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // the lease ends on a timer
			h = history(t, c, r, "u", time.Time{}, time.Time{}, 0)
		}
		checkHistory(t, h, fmt.Sprintf("{%d ref 0 cancelled, kept 1 in flight}", lease), "{1 ref 0 in flight}")
		k := h[0].Kept
		if k.ID != h[0].ID || k.Hold == h[0].Hold || !k.Taken.After(h[0].Ended) || k.Ended.Before(h[0].Taken.Add(time.Hour)) {
			t.Fatalf("the kept units = %+v of lease %+v: want them held again from the void until at least the lease's expiry", k, h[0])
		}
		if u := inspect(t, c, r, "u"); u.InFlight != 2 {
			t.Fatalf("in flight %d after the give-back, want the 2 used", u.InFlight)
		}
	})
}

// A money resource's history shows each payment beside its reservation,
// under the payment's ID, also when it was paid by a later attempt.
func TestHistoryPayments(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 1000})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "alice", Limit: 1000}, ledger.UserLimit{Key: "shop", Limit: 1000}); err != nil {
			t.Fatal(err)
		}
		fund := func(n uint64) {
			t.Helper()
			if err := c.Fund(ctx, r.Currency, ledger.Request{User: "alice", Amount: n}); err != nil {
				t.Fatal(err)
			}
		}
		pay := func(n uint64, id ledger.ID, want ledger.Reason) ledger.Decision {
			t.Helper()
			d, err := c.Pay(ctx, r, ledger.Payment{From: "alice", To: "shop", Amount: n, ID: id, Ref: n})
			if err != nil || d.Reason != want {
				t.Fatalf("Pay(%d, %s) = %+v, %v; want %v", n, id, d, err, want)
			}
			return d
		}
		fund(700)
		p1, p2, p3 := ledger.KeyID(b.Key("order-1")), ledger.KeyID(b.Key("order-2")), ledger.KeyID(b.Key("order-3"))
		pay(600, p1, ledger.Admitted)
		pay(200, p2, ledger.InsufficientFunds) // the reservation failed only with the payment: its ID is not spent
		fund(500)
		pay(200, p2, ledger.Admitted)
		pay(300, p3, ledger.LimitExceeded) // the reservation failed: a later attempt takes new IDs
		if err := c.SetLimit(ctx, r, "alice", 2000); err != nil {
			t.Fatal(err)
		}
		pay(300, p3, ledger.Admitted)
		pay(150, ledger.ID{}, ledger.InsufficientFunds)
		h := history(t, c, r, "alice", time.Time{}, time.Time{}, 0)
		checkHistory(t, h, `{300 ref 300 in flight, paid 300 to "shop"}`, `{200 ref 200 in flight, paid 200 to "shop"}`, `{600 ref 600 in flight, paid 600 to "shop"}`)
		if h[0].ID != p3 || h[0].Hold == p3 || h[1].ID != p2 || h[1].Hold != p2 || h[2].ID != p1 || h[2].Hold != p1 {
			t.Fatalf("History IDs = %s (hold %s), %s (hold %s), %s (hold %s); want %s (a later attempt), %s, %s",
				h[0].ID, h[0].Hold, h[1].ID, h[1].Hold, h[2].ID, h[2].Hold, p3, p2, p1)
		}
		for _, a := range h {
			if p := a.Payment; p.To != ledger.CurrencyUserID(r.Currency, "shop") || !p.Time.Equal(a.Taken.Add(time.Nanosecond)) || p.ID == a.Hold {
				t.Errorf("payment %+v of %+v: want shop's account, one event after the reservation", p, a)
			}
		}
		checkHistory(t, history(t, c, r, "shop", time.Time{}, time.Time{}, 0))
		checkHistory(t, history(t, c, r, "alice", h[1].Taken, h[1].Taken, 0), `{200 ref 200 in flight, paid 200 to "shop"}`)
	})
}

// smallPages refuses a get_account_transfers limit over n, as the client
// library refuses a batch over its limit, so that a Client learns to read n
// transfers a page.
type smallPages struct {
	tb.Client
	n int
}

func (s smallPages) GetAccountTransfers(f tb.AccountFilter) ([]tb.Transfer, error) {
	if int(f.Limit) > s.n {
		return nil, tb.ErrTooMuchData
	}
	return s.Client.GetAccountTransfers(f)
}

// History pages through any number of transfers, whatever the size of a
// page.
func TestHistoryPaging(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		_, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 1000})
		c := ledger.New(smallPages{b.Client, 16})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 1000}); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range 120 {
			if i%10 == 3 {
				if err := reserve(t, c, r, "u", 1).Cancel(ctx); err != nil {
					t.Fatal(err)
				}
				want = append(want, "{1 ref 0 cancelled}")
				continue
			}
			if _, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1, Ref: uint64(i)}); err != nil {
				t.Fatal(err)
			}
			want = append(want, fmt.Sprintf("{1 ref %d in flight}", i))
		}
		slices.Reverse(want)
		all := history(t, c, r, "u", time.Time{}, time.Time{}, 0)
		checkHistory(t, all, want...)
		checkHistory(t, history(t, c, r, "u", time.Time{}, time.Time{}, 37), want[:37]...)
		checkHistory(t, history(t, c, r, "u", all[90].Taken, all[20].Taken, 0), want[20:91]...)
		checkHistory(t, history(t, c, r, "u", all[90].Taken, all[20].Taken, 5), want[20:25]...)
		// Pages of the cluster's own size, which grow from twice what max asks.
		plain := ledger.New(b.Client)
		checkHistory(t, history(t, plain, r, "u", time.Time{}, time.Time{}, 70), want[:70]...)
		checkHistory(t, history(t, plain, r, "u", time.Time{}, all[30].Taken, 25), want[30:55]...)
	})
}

// On the embedded engine, more holds than one full page (8189 transfers).
func TestHistoryBeyondOnePage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		if b.Real {
			t.Skip("TestHistoryPaging pages on a real server; this one only adds the size of a full page")
		}
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 10_000})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 10_000}); err != nil {
			t.Fatal(err)
		}
		const n = ledger.BatchMax + 100
		for i := range n {
			if _, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1, Ref: uint64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		h := history(t, c, r, "u", time.Time{}, time.Time{}, 0)
		if len(h) != n || h[0].Ref != n-1 || h[n-1].Ref != 0 {
			t.Fatalf("History = %d admissions (first ref %d), want %d, newest first", len(h), h[0].Ref, n)
		}
		if h := history(t, c, r, "u", time.Time{}, time.Time{}, ledger.BatchMax+1); len(h) != ledger.BatchMax+1 || h[ledger.BatchMax].Ref != n-1-ledger.BatchMax {
			t.Fatalf("History with max %d = %d admissions", ledger.BatchMax+1, len(h))
		}
	})
}

// Holds that a lowered limit posted are committed, those Reset voided are
// cancelled; the hold SetLimit takes to keep a refund until its units would
// have returned is not an admission.
func TestHistoryOperatorActs(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 10})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 10}, ledger.UserLimit{Key: "v", Limit: 10}); err != nil {
			t.Fatal(err)
		}
		acquire(t, c, r, "u", 4)
		acquire(t, c, r, "u", 3)
		if err := c.SetLimit(ctx, r, "u", 1); err != nil { // takes the 3 available, posts the 4 and 3 of the 3
			t.Fatal(err)
		}
		checkHistory(t, history(t, c, r, "u", time.Time{}, time.Time{}, 0), "{3 ref 0 committed}", "{4 ref 0 committed}")
		if u := inspect(t, c, r, "u"); u.Limit != 1 || u.InFlight != 1 {
			t.Fatalf("Inspect after lowering = %+v, want a limit of 1 with the refunded unit held", u)
		}
		acquire(t, c, r, "v", 2)
		acquire(t, c, r, "v", 5)
		if n, err := c.Reset(ctx, r, "v"); err != nil || n != 2 {
			t.Fatalf("Reset = %d, %v", n, err)
		}
		checkHistory(t, history(t, c, r, "v", time.Time{}, time.Time{}, 0), "{5 ref 0 cancelled}", "{2 ref 0 cancelled}")
	})
}

// The later holds of an AcquireAll chain carry the request's name, also
// when its first attempt was spent and the chain was sent again under new
// IDs (here: a lazy user's first decision, provisioned within the call).
func TestHistoryChainAfterAnAgain(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, lazy := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 5, Lazy: true})
		_, other := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 5, Lazy: true})
		acquire(t, c, other, "u", 1) // u exists on the second resource only
		ds, err := c.AcquireAll(ctx, []ledger.Part{
			{Resource: lazy, Request: ledger.Request{User: "u", Amount: 1}},
			{Resource: other, Request: ledger.Request{User: "u", Amount: 1}},
		})
		if err != nil || !ds[0].Allowed {
			t.Fatalf("AcquireAll = %+v, %v", ds, err)
		}
		h := history(t, c, other, "u", time.Time{}, time.Time{}, 1)
		if h[0].ID != ds[0].ID {
			t.Fatalf("the chain's later hold is named %s, the request %s", h[0].ID, ds[0].ID)
		}
	})
}

// A lease's give-back holds again the units the lease handed out: they
// were taken when the lease was, and Audit should count them from then, as
// History folds them into the lease. Counted from the give-back, as new,
// they make a window of a lease user hold more than its limit.
func TestAuditCountsGiveBacksFromTheirLease(t *testing.T) {
	clock := embedded.NewManualClock(time.Now())
	e := embedded.New(embedded.WithClock(clock))
	r := ledger.Resource{Name: "x", Ledger: 1, Kind: ledger.KindRequests, Window: 10 * time.Second, DefaultLimit: 10, Lazy: true}
	c := ledger.New(e, ledger.WithLeases(ledger.Leases{Lifetime: time.Second, MaxUnits: 5}))
	if err := c.CreateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	for i := range 400 { // bursts of 4, a lifetime apart: leases end with units unused
		if _, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1}); err != nil {
			t.Fatal(err)
		}
		if i%4 == 3 {
			clock.Advance(1200 * time.Millisecond)
		} else {
			clock.Advance(10 * time.Millisecond)
		}
	}
	audit := ledger.New(e)
	h := history(t, audit, r, "u", time.Time{}, time.Time{}, 0)
	var most uint64 // the most taken in a window, give-backs counted from their lease
	for _, start := range h {
		var sum uint64
		for _, a := range h {
			if a.Taken.Before(start.Taken) || a.Taken.Sub(start.Taken) >= r.Window {
				continue
			}
			switch {
			case a.Kept != nil:
				sum += a.Kept.Amount
			case a.End == ledger.Expired || a.End == ledger.InFlight:
				sum += a.Amount
			}
		}
		most = max(most, sum)
	}
	a, err := audit.Audit(ctx, r, "u", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if a.MostInWindow != most || !a.OK() {
		t.Fatalf("Audit = %+v; the admissions hold at most %d in a window", a, most)
	}
}
