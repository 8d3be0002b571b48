package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger/embedded"
)

// A drained user's calls, leased or not, are denied from the denial its
// view published, without its lock (which every caller of a hot user would
// queue for), plan or not; what leased calls ask still counts in the
// lease's demand.
func TestDrainedUserDeniedWithoutItsLock(t *testing.T) {
	for _, leased := range []bool{false, true} {
		for _, plan := range []uint64{0, 10} {
			t.Run(fmt.Sprintf("leased=%v/plan=%d", leased, plan), func(t *testing.T) { deniedWithoutLock(t, leased, plan) })
		}
	}
}

func deniedWithoutLock(t *testing.T, leased bool, plan uint64) {
	ctx := context.Background()
	clock := embedded.NewManualClock(time.Unix(1_700_000_000, 0)) // stopped: the denial holds
	var opts []Option
	if leased {
		opts = append(opts, WithLeases(Leases{Lifetime: time.Second, MaxUnits: 5}))
	}
	c := New(embedded.New(embedded.WithClock(clock)), opts...)
	r := Resource{Name: "r", Ledger: 1, Kind: KindRequests, Window: time.Hour, DefaultLimit: 10, Lazy: true}
	if err := c.CreateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	take := func(n uint64) (Decision, error) { return c.Acquire(ctx, r, Request{User: "u", Amount: n, Limit: plan}) }
	for i, want := range []bool{true, false, false} { // drained; the cluster confirms; published
		if d, err := take([]uint64{10, 1, 1}[i]); err != nil || d.Allowed != want {
			t.Fatalf("call %d = %+v, %v; want allowed %v", i, d, err, want)
		}
	}
	u := c.users.get(r, "u")
	dn := u.denial.Load()
	if dn == nil || (dn.asked != nil) != leased {
		t.Fatalf("a drained user's denial published as %+v", dn)
	}
	var asked uint64
	if leased {
		asked = dn.asked.load()
	}

	u.mu.Lock()
	type answer struct {
		d   Decision
		err error
	}
	done := make(chan answer, 1)
	go func() {
		d, err := take(1)
		done <- answer{d, err}
	}()
	select {
	case a := <-done:
		if a.err != nil || a.d.Allowed || a.d.Reason != LimitExceeded {
			t.Errorf("call of a drained user = %+v, %v; want denied", a.d, a.err)
		}
	case <-time.After(30 * time.Second):
		u.mu.Unlock()
		<-done
		t.Fatal("a call of a drained user waited for the user's lock")
	}
	if !leased {
		u.mu.Unlock()
		return
	}
	demand := u.lease.demand
	u.mu.Unlock()
	if n := dn.asked.load(); n != asked+1 {
		t.Errorf("the denial counted %d units asked, want %d", n, asked+1)
	}
	u.lock() // withdraws the denial: its count goes into the demand
	got := u.lease.demand
	u.mu.Unlock()
	if got != demand+asked+1 {
		t.Errorf("lease demand %d after the denial was withdrawn, want %d+%d", got, demand, asked+1)
	}
}

// A denial published for a plain call does not say whether the user's
// lease can serve, so a leased call does not take it; a leased call's
// denial serves both.
func TestLeasedCallsTakeOnlyLeasedDenials(t *testing.T) {
	now := int64(sec)
	clock := embedded.NewManualClock(time.Unix(0, now))
	c := New(embedded.New(embedded.WithClock(clock)), WithLeases(Leases{Lifetime: time.Second, MaxUnits: 5}))
	u := drained(now)
	u.lease = &lease{}
	publish(t, u, now, false)
	if d, ok := c.denyPublished(u, 1, true, 0); ok {
		t.Errorf("a leased call denied from a plain call's denial: %+v", d)
	}
	if _, ok := c.denyPublished(u, 1, false, 0); !ok {
		t.Error("a plain call not denied from a plain call's denial")
	}
	publish(t, u, now, true)
	for _, leased := range []bool{true, false} {
		if _, ok := c.denyPublished(u, 1, leased, 0); !ok {
			t.Errorf("a call (leased %v) not denied from a leased call's denial", leased)
		}
		// A call whose plan differs must give the user its limit first.
		if d, ok := c.denyPublished(u, 1, leased, u.v.Limit()+1); ok {
			t.Errorf("a call (leased %v) with a plan of %d denied from a denial under %d: %+v", leased, u.v.Limit()+1, u.v.Limit(), d)
		}
	}
	// Every leased denial of the user counts in one counter, the lease's.
	first := u.denial.Load().asked
	publish(t, u, now, true)
	if again := u.denial.Load().asked; again != first || again != u.lease.asked {
		t.Error("a leased denial published again counts in a counter of its own")
	}
}
