package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// A charge is recorded even past the limit: it takes what remains, the
// next decision is denied until units return, and nothing is lowered for
// good.
func TestChargeTakesWhatRemains(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 100, Lazy: true})
		charge := func(n uint64) ledger.Charged {
			t.Helper()
			d, err := c.Charge(ctx, r, ledger.Request{User: "u", Amount: n})
			if err != nil || !d.Allowed {
				t.Fatalf("Charge(%d) = %+v, %v; want recorded", n, d, err)
			}
			return d
		}
		if d := charge(60); d.Remaining != 40 || d.Limit != 100 || d.Taken != 60 {
			t.Fatalf("Charge(60) of 100 = %+v, want 60 taken, 40 remaining", d)
		}
		if d := charge(70); d.Remaining != 0 || d.Taken != 40 {
			t.Fatalf("Charge(70) with 40 left = %+v, want 40 taken, 0 remaining", d)
		}
		if u := inspect(t, c, r, "u"); u.Limit != 100 || u.InFlight != 100 || u.Available != 0 {
			t.Fatalf("after charging 130 of 100: %+v; want 100 in flight, none available, the limit untouched", u)
		}
		if d := charge(5); d.Remaining != 0 || d.Taken != 0 {
			t.Fatalf("Charge(5) with none left = %+v, want recorded, none taken, 0 remaining", d)
		}
		if d := acquire(t, c, r, "u", 1); d.Allowed {
			t.Fatalf("Acquire(1) after the charges = %+v, want denied", d)
		}
		if _, err := c.Charge(ctx, r, ledger.Request{User: "u", Amount: 0}); !errors.Is(err, ledger.ErrInvalidAmount) {
			t.Fatalf("Charge(0) = %v, want ErrInvalidAmount", err)
		}
		// Another Client, which knows nothing of u, sees the same.
		other := ledger.New(b.Client)
		if d, err := other.Charge(ctx, r, ledger.Request{User: "u", Amount: 3}); err != nil || !d.Allowed || d.Remaining != 0 || d.Taken != 0 {
			t.Fatalf("Charge(3) from another Client = %+v, %v; want recorded, 0 remaining", d, err)
		}
		if d, err := other.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1}); err != nil || d.Allowed {
			t.Fatalf("Acquire(1) from another Client = %+v, %v; want denied", d, err)
		}
		if b.Real {
			return
		}
		b.Advance(t, time.Hour+time.Second)
		if u := inspect(t, c, r, "u"); u.Available != 100 {
			t.Fatalf("a window later: %+v; want all 100 back", u)
		}
		if d := acquire(t, c, r, "u", 100); !d.Allowed {
			t.Fatalf("Acquire(100) a window later = %+v, want the whole limit", d)
		}
	})
}

// A charge under a request ID is recorded once however often it is sent.
func TestChargeOnce(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 100, Lazy: true})
		id := ledger.KeyID(b.Key("call-1"))
		for range 3 {
			if d, err := c.Charge(ctx, r, ledger.Request{User: "u", Amount: 30, ID: id}); err != nil || !d.Allowed {
				t.Fatalf("Charge(30) under %s = %+v, %v", id, d, err)
			}
		}
		if u := inspect(t, c, r, "u"); u.InFlight != 30 {
			t.Fatalf("after one charge sent three times: %+v; want 30 in flight", u)
		}
	})
}
