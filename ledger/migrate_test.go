package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// A user moved to a resource with another window and limit keeps every
// unit it holds on the old one until it would have returned there.
func TestMigrateCarriesUnitsInFlight(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		_, from := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 10, Lazy: true})
		c := ledger.New(b.Client, ledger.WithNow(b.Now))
		to := ledger.Resource{Name: "new", Ledger: b.NewLedger(), Kind: ledger.KindRequests, Window: 2 * time.Hour, DefaultLimit: 5, Lazy: true}
		if err := c.CreateResource(ctx, to); err != nil {
			t.Fatal(err)
		}
		user := t.Name()
		for range 6 {
			acquire(t, c, from, user, 1)
		}
		m, err := c.Migrate(ctx, from, to, user, 0)
		if err != nil || m.Limit != 5 || m.Carried != 5 || m.CarriedUnits != 5 {
			t.Fatalf("Migrate = %+v, %v; want limit 5 and the 5 holds that return last carried (of 6)", m, err)
		}
		if u := inspect(t, c, to, user); u.Limit != 5 || u.Available != 0 || u.InFlight != 5 {
			t.Fatalf("on the new resource: %+v, want limit 5 with 5 carried units in flight", u)
		}
		if d := acquire(t, c, to, user, 1); d.Allowed {
			t.Fatalf("Acquire on the new resource with 6 of 5 carried = %+v, want denied", d)
		}
		// Taken on the old one meanwhile, by a caller not moved yet: the
		// second run carries it, and only it.
		other := ledger.New(b.Client, ledger.WithNow(b.Now))
		if _, err := other.Acquire(ctx, from, ledger.Request{User: user, Amount: 1}); err != nil {
			t.Fatal(err)
		}
		if m, err := c.Migrate(ctx, from, to, user, 0); err != nil || m.Carried != 0 {
			t.Fatalf("Migrate again, with no room = %+v, %v; want nothing carried", m, err)
		}
		if m, err := c.Migrate(ctx, from, to, user, 0); err != nil || m.Carried != 0 {
			t.Fatalf("Migrate a third time = %+v, %v; want nothing carried", m, err)
		}
		if !b.Real {
			b.Advance(t, time.Hour+2*time.Second) // the old window (carried holds round up to the second): they return
			if d := acquire(t, c, to, user, 5); !d.Allowed {
				t.Errorf("Acquire of the whole new limit once the old window passed = %+v, want admitted", d)
			}
		}
		// With room on the new resource, a second run carries what was
		// taken on the old one since the first, and only that.
		roomy := user + "/roomy"
		for range 3 {
			acquire(t, c, from, roomy, 1)
		}
		if m, err := c.Migrate(ctx, from, to, roomy, 0); err != nil || m.Carried != 3 {
			t.Fatalf("Migrate(roomy) = %+v, %v; want 3 carried", m, err)
		}
		acquire(t, other, from, roomy, 1)
		if m, err := c.Migrate(ctx, from, to, roomy, 0); err != nil || m.Carried != 1 || m.CarriedUnits != 1 {
			t.Fatalf("Migrate(roomy) again = %+v, %v; want the 1 taken since carried", m, err)
		}
		if u := inspect(t, c, to, roomy); u.InFlight != 4 {
			t.Errorf("roomy on the new resource: %d in flight, want 4, each carried once", u.InFlight)
		}
		if _, err := c.Migrate(ctx, from, from, user, 0); !errors.Is(err, ledger.ErrInvalidResource) {
			t.Errorf("Migrate to itself = %v, want ErrInvalidResource", err)
		}
	})
}
