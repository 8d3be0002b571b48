package ledger_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// A reservation is found again by its hold, from another Client, and
// committed for less than it holds: the rest comes back at once, the
// committed units stay counted, and the limit is untouched.
func TestReservationByHold(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 10, Lazy: true})
		long := strings.Repeat("k", 40) // kept in name accounts
		for _, user := range []string{"u", long} {
			rv, err := c.Reserve(ctx, r, ledger.Request{User: user, Amount: 5, ID: ledger.KeyID(b.Key("job-" + user))})
			if err != nil || !rv.OK() {
				t.Fatalf("Reserve(%s, 5) = %+v, %v", user, rv, err)
			}
			if rv.Hold().IsZero() {
				t.Fatal("Hold() of a reservation = zero")
			}
			var found [2]*ledger.Reservation // by the Client that reserved, and by another
			for i, by := range []*ledger.Client{c, ledger.New(b.Client)} {
				if found[i], err = by.Reservation(ctx, rv.Hold()); err != nil {
					t.Fatalf("Reservation(%s) = %v", rv.Hold(), err)
				}
				if d := found[i].Decision(); !found[i].OK() || d.ID != rv.Decision().ID || found[i].Hold() != rv.Hold() {
					t.Fatalf("Reservation(%s) = %+v, hold %s; want OK, ID %s", rv.Hold(), d, found[i].Hold(), rv.Decision().ID)
				}
			}
			if err := found[0].CommitN(ctx, 6); !errors.Is(err, ledger.ErrInvalidAmount) {
				t.Fatalf("CommitN(6) of 5 = %v, want ErrInvalidAmount", err)
			}
			for _, rv := range found { // a retry, from anywhere, is the same commit
				if err := rv.CommitN(ctx, 2); err != nil {
					t.Fatalf("CommitN(2) = %v", err)
				}
			}
			if err := rv.CommitN(ctx, 3); !errors.Is(err, ledger.ErrReservationEnded) {
				t.Fatalf("CommitN(3) after CommitN(2) = %v, want ErrReservationEnded", err)
			}
			if u := inspect(t, c, r, user); u.Limit != 10 || u.InFlight != 2 || u.Available != 8 {
				t.Fatalf("%s after committing 2 of 5: %+v; want limit 10, 2 in flight, 8 available", user, u)
			}
			// The Client that committed first was told: its view counts 2.
			if d := acquire(t, c, r, user, 1); !d.Allowed || d.Limit != 10 || d.Remaining != 7 {
				t.Fatalf("Acquire(%s, 1) after the commit = %+v; want allowed, limit 10, 7 remaining", user, d)
			}
		}
	})
}

// A cancelled reservation cannot be committed, and a hold that is not a
// reservation's is not found.
func TestReservationEnded(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 10, Lazy: true})
		rv, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 4})
		if err != nil || !rv.OK() {
			t.Fatalf("Reserve = %+v, %v", rv, err)
		}
		found, err := c.Reservation(ctx, rv.Hold())
		if err != nil {
			t.Fatal(err)
		}
		if err := found.Cancel(ctx); err != nil {
			t.Fatalf("Cancel = %v", err)
		}
		if err := rv.Cancel(ctx); err != nil {
			t.Fatalf("Cancel again = %v", err)
		}
		if err := rv.Commit(ctx); !errors.Is(err, ledger.ErrReservationEnded) {
			t.Fatalf("Commit after Cancel = %v, want ErrReservationEnded", err)
		}
		if u := inspect(t, c, r, "u"); u.Limit != 10 || u.Available != 10 {
			t.Fatalf("after Cancel: %+v, want all 10 available", u)
		}
		if _, err := c.Reservation(ctx, ledger.NewID()); !errors.Is(err, ledger.ErrUnknownReservation) {
			t.Fatalf("Reservation(a new ID) = %v, want ErrUnknownReservation", err)
		}
		d := acquire(t, c, r, "u", 1) // a decision's hold is no reservation: no call may end it
		if _, err := c.Reservation(ctx, d.ID); !errors.Is(err, ledger.ErrUnknownReservation) {
			t.Fatalf("Reservation(a decision's hold) = %v, want ErrUnknownReservation", err)
		}
		// An Acquire's request ID is not a Reserve's.
		id := ledger.KeyID(b.Key("acquired"))
		if d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1, ID: id}); err != nil || !d.Allowed {
			t.Fatalf("Acquire under %s = %+v, %v", id, d, err)
		}
		if _, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 1, ID: id}); !errors.Is(err, ledger.ErrIDReused) {
			t.Fatalf("Reserve under an Acquire's ID = %v, want ErrIDReused", err)
		}
		denied, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 11})
		if err != nil || denied.OK() || !denied.Hold().IsZero() {
			t.Fatalf("Reserve(11 of 10) = %+v, hold %s, %v; want denied, no hold", denied.Decision(), denied.Hold(), err)
		}
	})
}

// Committed units stay counted until the reservation's window ends, and
// then come back: a commit never lowers the limit. The reservation ended by
// its commit cannot be cancelled, and what the commit kept is no
// reservation of its own.
func TestCommitKeepsTheWindow(t *testing.T) {
	eachInTime(t, 2*time.Second, time.Minute, func(t *testing.T, b *testenv.Backend, w time.Duration) bool {
		c, r := setup(t, b, ledger.Resource{Window: w, DefaultLimit: 10, Lazy: true})
		rv := reserve(t, c, r, "u", 6)
		if err := rv.CommitN(ctx, 4); err != nil {
			t.Fatalf("CommitN(4) = %v", err)
		}
		if !testenv.Within(rv.Decision().Timestamp, uint64(b.Now().UnixNano()), w) {
			return false
		}
		if u := inspect(t, c, r, "u"); u.Limit != 10 || u.InFlight != 4 || u.Available != 6 {
			t.Fatalf("after committing 4 of 6: %+v; want limit 10, 4 in flight, 6 available", u)
		}
		if err := rv.Cancel(ctx); !errors.Is(err, ledger.ErrReservationEnded) {
			t.Fatalf("Cancel after Commit = %v, want ErrReservationEnded", err)
		}
		if err := rv.CommitN(ctx, 4); err != nil {
			t.Fatalf("CommitN(4) again = %v, want nil (the same commit)", err)
		}
		h := history(t, c, r, "u", time.Time{}, time.Time{}, 0)
		checkHistory(t, h, "{6 ref 0 committed, kept 4 in flight}")
		if _, err := c.Reservation(ctx, h[0].Kept.Hold); !errors.Is(err, ledger.ErrUnknownReservation) {
			t.Fatalf("Reservation(the kept hold) = %v, want ErrUnknownReservation", err)
		}
		if !testenv.Within(rv.Decision().Timestamp, uint64(b.Now().UnixNano()), w) {
			return false
		}
		// The kept units return by the reservation's own expiry, rounded up
		// to a second (and one more on a remote cluster).
		left := time.Duration(rv.Decision().Timestamp + uint64(w) - uint64(b.Now().UnixNano()))
		b.Advance(t, left+time.Second+time.Millisecond)
		if b.Real {
			time.Sleep(time.Second + 300*time.Millisecond)
		}
		if u := inspect(t, c, r, "u"); u.Limit != 10 || u.InFlight != 0 || u.Available != 10 {
			t.Fatalf("a window after the reservation: %+v; want all 10 back", u)
		}
		if d := acquire(t, c, r, "u", 10); !d.Allowed {
			t.Fatalf("Acquire(10) a window after = %+v; want the whole limit", d)
		}
		return true
	})
}

// Over many reservations, each committed for less than it held, no window
// ever holds more than the limit and the limit never shrinks: the
// budget-burning pattern of check then charge.
func TestReserveCommitNeverBurnsTheLimit(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		w := time.Minute
		c, r := setup(t, b, ledger.Resource{Window: w, DefaultLimit: 2000, Lazy: true})
		for round := range 3 {
			admitted := 0
			for range 40 {
				rv, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 500})
				if err != nil {
					t.Fatal(err)
				}
				if !rv.OK() {
					break
				}
				admitted++
				if err := rv.CommitN(ctx, 100); err != nil {
					t.Fatalf("CommitN(100) = %v", err)
				}
			}
			if admitted != 16 { // 15 commits of 100 leave 500 for the 16th reservation
				t.Fatalf("round %d: %d reservations of 500 committed at 100 fit in a limit of 2000, want 16", round, admitted)
			}
			if b.Real {
				return // the rounds need the window to pass: the manual clock's
			}
			b.Advance(t, w+2*time.Second)
			if u := inspect(t, c, r, "u"); u.Limit != 2000 || u.Available != 2000 {
				t.Fatalf("round %d, a window later: %+v; want the whole limit of 2000 back", round, u)
			}
		}
	})
}

// A reservation under a request ID is made once: a later Reserve under the
// ID answers it again, one of another amount is ErrIDReused, and
// ReservationFor finds it by the ID, after a denial under it too.
func TestReservationUnderAnID(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 10, Lazy: true})
		id := ledger.KeyID(b.Key("call-1"))
		first, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 4, ID: id})
		if err != nil || !first.OK() {
			t.Fatalf("Reserve(4) under %s = %+v, %v; want reserved", id, first.Decision(), err)
		}
		again, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 4, ID: id})
		if err != nil || !again.OK() || again.Hold() != first.Hold() || again.Decision().Remaining != 6 {
			t.Fatalf("Reserve(4) again = %+v, %v; want the same reservation, 6 left", again.Decision(), err)
		}
		if _, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 3, ID: id}); !errors.Is(err, ledger.ErrIDReused) {
			t.Fatalf("Reserve(3) under the ID of a reservation of 4 = %v, want ErrIDReused", err)
		}
		found, err := c.ReservationFor(ctx, r, "u", id)
		if err != nil || found.Hold() != first.Hold() {
			t.Fatalf("ReservationFor(%s) = %v, %v; want hold %s", id, found, err, first.Hold())
		}
		if _, err := c.ReservationFor(ctx, r, "someone-else", id); !errors.Is(err, ledger.ErrUnknownReservation) {
			t.Fatalf("ReservationFor(another user, %s) = %v, want ErrUnknownReservation", id, err)
		}
		if _, err := c.ReservationFor(ctx, r, "u", ledger.KeyID(b.Key("never"))); !errors.Is(err, ledger.ErrUnknownReservation) {
			t.Fatalf("ReservationFor(an ID never used) = %v, want ErrUnknownReservation", err)
		}
		// Denied first, then admitted under the same ID: found by the ID.
		late := ledger.KeyID(b.Key("call-2"))
		if rv, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 7, ID: late}); err != nil || rv.OK() {
			t.Fatalf("Reserve(7) with 6 left = %+v, %v; want denied", rv, err)
		}
		if err := first.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		rv, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 7, ID: late})
		if err != nil || !rv.OK() {
			t.Fatalf("Reserve(7) once 10 are left = %+v, %v; want reserved", rv, err)
		}
		found, err = c.ReservationFor(ctx, r, "u", late)
		if err != nil || found.Hold() != rv.Hold() {
			t.Fatalf("ReservationFor(%s) = %v, %v; want hold %s", late, found, err, rv.Hold())
		}
	})
}

// ReserveAll holds every part or none; each part is then committed on its
// own; a chain sent again under its request ID is the same reservations.
func TestReserveAll(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, tokens := setup(t, b, ledger.Resource{Window: time.Minute, DefaultLimit: 10000, Lazy: true})
		_, calls := setup(t, b, ledger.Resource{Window: time.Minute, DefaultLimit: 2, Lazy: true})
		parts := func(max uint64, id ledger.ID) []ledger.Part {
			return []ledger.Part{
				{Resource: tokens, Request: ledger.Request{User: "u", Amount: max, ID: id}},
				{Resource: calls, Request: ledger.Request{User: "u", Amount: 1}},
			}
		}
		id := ledger.KeyID(b.Key("call-1"))
		rvs, err := c.ReserveAll(ctx, parts(4000, id))
		if err != nil || len(rvs) != 2 || !rvs[0].OK() || !rvs[1].OK() {
			t.Fatalf("ReserveAll = %v, %v; want both reserved", rvs, err)
		}
		again, err := c.ReserveAll(ctx, parts(4000, id))
		if err != nil || again[0].Hold() != rvs[0].Hold() || again[1].Hold() != rvs[1].Hold() {
			t.Fatalf("ReserveAll again under %s = %v, %v; want the same holds", id, again, err)
		}
		if err := rvs[0].CommitN(ctx, 1500); err != nil {
			t.Fatal(err)
		}
		if err := rvs[1].Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if u := inspect(t, c, tokens, "u"); u.InFlight != 1500 {
			t.Fatalf("tokens after settling 4000 to 1500: %+v", u)
		}
		if _, err := c.ReserveAll(ctx, parts(100, ledger.ID{})); err != nil {
			t.Fatal(err)
		}
		// The calls limit (2) is reached: the next chain holds nothing.
		rvs, err = c.ReserveAll(ctx, parts(100, ledger.ID{}))
		if err != nil || rvs[0].OK() || rvs[1].OK() || rvs[1].Decision().Reason != ledger.LimitExceeded {
			t.Fatalf("ReserveAll past the calls limit = %v, %v; want both denied", rvs, err)
		}
		if u := inspect(t, c, tokens, "u"); u.InFlight != 1600 {
			t.Fatalf("tokens after a denied chain: %+v; want 1600 in flight", u)
		}
	})
}
