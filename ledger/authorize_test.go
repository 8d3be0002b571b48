package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

type payFixture struct {
	t *testing.T
	c *ledger.Client
	r ledger.Resource
}

func newPayFixture(t *testing.T, b *testenv.Backend, w time.Duration, limit, funds uint64) *payFixture {
	t.Helper()
	c, r := setup(t, b, ledger.Resource{Kind: ledger.KindMoney, Window: w, DefaultLimit: limit})
	if err := c.Provision(ctx, r, ledger.UserLimit{Key: "cust", Limit: limit}, ledger.UserLimit{Key: "shop"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Fund(ctx, r.Currency, ledger.Request{User: "cust", Amount: funds}); err != nil {
		t.Fatal(err)
	}
	return &payFixture{t: t, c: c, r: r}
}

// holds checks what cust and shop hold and what cust's limit has left.
func (f *payFixture) holds(cust, shop, available uint64) {
	f.t.Helper()
	for user, want := range map[string]uint64{"cust": cust, "shop": shop} {
		if got, err := f.c.Funds(ctx, f.r.Currency, user); err != nil || got != want {
			f.t.Errorf("%s holds %d, %v; want %d", user, got, err, want)
		}
	}
	if u := inspect(f.t, f.c, f.r, "cust"); u.Available != available {
		f.t.Errorf("cust's limit: %+v; want %d available", u, available)
	}
}

func (f *payFixture) authorize(p ledger.Payment) *ledger.Reservation {
	f.t.Helper()
	p.From, p.To = "cust", "shop"
	rv, err := f.c.Authorize(ctx, f.r, p)
	if err != nil || !rv.OK() {
		f.t.Fatalf("Authorize(%d) = %+v, %v; want authorized", p.Amount, rv, err)
	}
	return rv
}

// An authorization holds the money and the limit; a capture of less moves
// what it captures, keeps it on the limit for the window and gives the rest
// of both back; retried, from another Client, it moves nothing more.
func TestAuthorizeThenCapture(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newPayFixture(t, b, time.Hour, 1000, 1000)
		id := ledger.KeyID(b.Key("auth-1"))
		rv := f.authorize(ledger.Payment{Amount: 600, ID: id, Ref: 42})
		f.holds(400, 0, 400)
		again := f.authorize(ledger.Payment{Amount: 600, ID: id, Ref: 42}) // a retry of the authorization
		if again.Hold() != rv.Hold() {
			t.Fatalf("Authorize retried under its ID holds %s, want %s", again.Hold(), rv.Hold())
		}
		f.holds(400, 0, 400)

		if err := rv.CommitN(ctx, 601); !errors.Is(err, ledger.ErrInvalidAmount) {
			t.Fatalf("capture 601 of 600 = %v, want ErrInvalidAmount", err)
		}
		if err := rv.CommitN(ctx, 450); err != nil {
			t.Fatalf("capture 450 = %v", err)
		}
		f.holds(550, 450, 550)
		found, err := ledger.New(b.Client).Reservation(ctx, rv.Hold())
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []*ledger.Reservation{rv, again, found} {
			if err := x.CommitN(ctx, 450); err != nil {
				t.Fatalf("capture 450 again = %v, want nil (the same capture)", err)
			}
		}
		f.holds(550, 450, 550)
		if err := found.CommitN(ctx, 500); !errors.Is(err, ledger.ErrReservationEnded) {
			t.Fatalf("capture 500 after 450 = %v, want ErrReservationEnded", err)
		}
		if err := found.Cancel(ctx); !errors.Is(err, ledger.ErrReservationEnded) {
			t.Fatalf("release after capture = %v, want ErrReservationEnded", err)
		}
		f.holds(550, 450, 550)
	})
}

// A release gives the money and the limit back; nothing can be captured
// after it. An authorization neither captured nor released expires, and
// both come back.
func TestAuthorizeThenRelease(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newPayFixture(t, b, time.Hour, 1000, 1000)
		rv := f.authorize(ledger.Payment{Amount: 300})
		f.holds(700, 0, 700)
		if err := rv.Cancel(ctx); err != nil {
			t.Fatalf("release = %v", err)
		}
		if err := rv.Cancel(ctx); err != nil {
			t.Fatalf("release again = %v, want nil", err)
		}
		f.holds(1000, 0, 1000)
		if err := rv.Commit(ctx); !errors.Is(err, ledger.ErrReservationEnded) {
			t.Fatalf("capture after release = %v, want ErrReservationEnded", err)
		}
		f.holds(1000, 0, 1000)

		if b.Real {
			return // expiry: the manual clock's
		}
		short := f.authorize(ledger.Payment{Amount: 200, Timeout: 10 * time.Second})
		f.holds(800, 0, 800)
		b.Advance(t, 11*time.Second)
		if err := short.Commit(ctx); !errors.Is(err, ledger.ErrReservationExpired) {
			t.Fatalf("capture after expiry = %v, want ErrReservationExpired", err)
		}
		f.holds(1000, 0, 1000)
	})
}

// An authorization over the limit or the funds is denied and holds
// nothing; bad authorizations are errors that write nothing; a payment's
// hold is no authorization.
func TestAuthorizeRefused(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newPayFixture(t, b, time.Hour, 1000, 500)
		for _, c := range []struct {
			amount uint64
			reason ledger.Reason
		}{{1001, ledger.LimitExceeded}, {600, ledger.InsufficientFunds}} {
			rv, err := f.c.Authorize(ctx, f.r, ledger.Payment{From: "cust", To: "shop", Amount: c.amount})
			if err != nil || rv.OK() || rv.Decision().Reason != c.reason || !rv.Hold().IsZero() {
				t.Fatalf("Authorize(%d) = %+v, %v; want denied for %v", c.amount, rv.Decision(), err, c.reason)
			}
			if err := rv.Commit(ctx); !errors.Is(err, ledger.ErrReservationEnded) {
				t.Fatalf("capture of a denied authorization = %v, want ErrReservationEnded", err)
			}
		}
		f.holds(500, 0, 1000)
		for _, p := range []ledger.Payment{
			{From: "cust", To: "shop", Amount: 10, Timeout: 2 * time.Hour}, // past the window
			{From: "cust", To: "shop", Amount: 10, Timeout: 1500 * time.Millisecond},
			{From: "cust", To: "cust", Amount: 10},
			{From: "cust", To: "shop", Amount: 0},
		} {
			if _, err := f.c.Authorize(ctx, f.r, p); err == nil {
				t.Errorf("Authorize(%+v) = nil error, want one", p)
			}
		}
		if _, err := f.c.Pay(ctx, f.r, ledger.Payment{From: "cust", To: "shop", Amount: 10, Timeout: time.Hour}); !errors.Is(err, ledger.ErrInvalidWindow) {
			t.Errorf("Pay with a timeout = %v, want ErrInvalidWindow", err)
		}
		d, err := f.c.Pay(ctx, f.r, ledger.Payment{From: "cust", To: "shop", Amount: 100})
		if err != nil || !d.Allowed {
			t.Fatalf("Pay(100) = %+v, %v", d, err)
		}
		if _, err := f.c.Reservation(ctx, d.ID); !errors.Is(err, ledger.ErrUnknownReservation) {
			t.Fatalf("Reservation(a payment's hold) = %v, want ErrUnknownReservation", err)
		}
		f.holds(400, 100, 900)
	})
}
