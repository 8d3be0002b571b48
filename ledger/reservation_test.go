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
// committed for less than it holds: the rest comes back at once, and the
// committed units never return.
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
			if u := inspect(t, c, r, user); u.Limit != 8 || u.InFlight != 0 || u.Available != 8 {
				t.Fatalf("%s after committing 2 of 5: %+v; want limit 8, none in flight, 8 available", user, u)
			}
			// The Client that committed first was told: its view counts 8.
			if d := acquire(t, c, r, user, 1); !d.Allowed || d.Limit != 8 || d.Remaining != 7 {
				t.Fatalf("Acquire(%s, 1) after the commit = %+v; want allowed, limit 8, 7 remaining", user, d)
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
		d := acquire(t, c, r, "u", 1) // a decision is a hold too: found, and Commit would keep it
		if _, err := c.Reservation(ctx, d.ID); err != nil {
			t.Fatalf("Reservation(a decision's hold) = %v", err)
		}
		denied, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 11})
		if err != nil || denied.OK() || !denied.Hold().IsZero() {
			t.Fatalf("Reserve(11 of 10) = %+v, hold %s, %v; want denied, no hold", denied.Decision(), denied.Hold(), err)
		}
	})
}
