package ledger

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger/internal/view"
)

const sec = uint64(time.Second)

func id(n byte) [16]byte { return [16]byte{n} }

// drained returns a user whose view holds all of its limit, 4 units
// returning at 10 s and 6 at 12 s, and whose denial the cluster confirmed
// at local time now.
func drained(now int64) *user {
	u := &user{v: view.New(10, 10*sec, 0, true)}
	u.v.Took(id(1), 4, 10*sec)
	u.v.Took(id(2), 6, 12*sec)
	u.v.Denied(1, 0, now) // a denial the view predicted: the cluster confirmed it
	return u
}

// publish has u's view deny 1 unit at now (as cluster and local time) and
// publishes that denial, for a call to a lease (leased) or not.
func publish(t *testing.T, u *user, now int64, leased bool) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.v.Deny(1, uint64(now), now) {
		t.Fatal("a drained view does not deny")
	}
	u.publishDenial(1, uint64(now), now, leased)
}

// TestPublishedDenial: a denial published under the user's lock says, at
// every instant it holds, what the view itself would say then; it stops at
// the first return and at the view.Recheck, and whoever changes the user clears
// it.
func TestPublishedDenial(t *testing.T) {
	now := int64(1 * sec)
	t0 := uint64(now)
	u := drained(now)
	publish(t, u, now, false)
	dn := u.denial.Load()
	if dn == nil {
		t.Fatal("no denial published")
	}
	for _, at := range []uint64{t0, t0 + sec/2, t0 + sec - 1} {
		got, ok := dn.decision(1, at, int64(at))
		if want := localDenial(&u.v, 1, at); !ok || got != want {
			t.Errorf("at %v: %+v %v, want %+v", at, got, ok, want)
		}
	}
	for _, c := range []struct {
		amount uint64
		at     uint64
		now    int64
	}{
		{2, t0, now},                            // another amount
		{1, 10 * sec, now},                      // the first hold has returned
		{1, t0 + sec, int64(t0 + sec)},          // time to ask the cluster again
		{1, 5 * sec, now + int64(view.Recheck)}, // likewise, by this Client's clock
	} {
		if d, ok := dn.decision(c.amount, c.at, c.now); ok {
			t.Errorf("%+v: %+v, want no decision", c, d)
		}
	}
	u.lock()
	u.mu.Unlock()
	if u.denial.Load() != nil {
		t.Error("a change left the denial published")
	}

	// A denial for a call to a lease counts what the calls it denies ask,
	// and the lease's demand takes it in when the denial is withdrawn,
	// whether by a change or by a denial published in its place.
	u.lease = &lease{demand: 1}
	for _, replace := range []func(){
		func() { u.lock(); u.mu.Unlock() },
		func() { publish(t, u, now, false) },
	} {
		u.lease.demand = 1
		publish(t, u, now, true)
		dn := u.denial.Load()
		if dn == nil || dn.asked == nil {
			t.Fatalf("leased denial published as %+v, want one that counts demand", dn)
		}
		dn.asked.add(2)
		dn.asked.add(3)
		replace()
		if u.lease.demand != 6 {
			t.Errorf("lease demand %d after the denial was withdrawn, want 1+2+3", u.lease.demand)
		}
	}
}
