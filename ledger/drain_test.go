package ledger_test

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// A drained user is denied without I/O until its first unit returns, and
// exactly then admitted again.
func TestDrainedUsersDeniedLocally(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		w := 2 * time.Second
		c, r := setup(t, b, ledger.Resource{Window: w, DefaultLimit: 3, Lazy: true})
		other := ledger.New(b.Client) // another process
		acquire(t, c, r, "u", 2)
		b.Advance(t, time.Second)
		acquire(t, c, r, "u", 1)
		first := acquire(t, c, r, "u", 1) // denied: learns that u is drained
		if first.Allowed || first.RetryAfter <= 0 || first.RetryAfter > time.Second+10*time.Millisecond {
			t.Fatalf("first denial = %+v, want RetryAfter in (0, 1s]", first)
		}
		sent := c.Stats()
		for i := 0; i < 50; i++ {
			d := acquire(t, c, r, "u", 1)
			if d.Allowed || d.Reason != ledger.LimitExceeded || d.RetryAfter <= 0 || d.Limit != 3 {
				t.Fatalf("local denial = %+v", d)
			}
			if d2 := acquire(t, c, r, "u", 3); d2.Allowed || d2.RetryAfter <= d.RetryAfter {
				t.Fatalf("denial of 3 = %+v, want later than %v", d2, d.RetryAfter)
			}
		}
		if now := c.Stats(); now.CreateTransfers != sent.CreateTransfers || now.LookupAccounts != sent.LookupAccounts {
			t.Fatalf("denials of a drained user sent requests: %+v then %+v", sent.CreateTransfers, now.CreateTransfers)
		}
		// The first two units return one window after they were taken.
		b.Advance(t, first.RetryAfter+time.Millisecond)
		if b.Real {
			time.Sleep(300 * time.Millisecond)
		}
		if d := acquire(t, c, r, "u", 2); !d.Allowed {
			t.Fatalf("Acquire(2) when two units returned = %+v", d)
		}
		if d := acquire(t, c, r, "u", 1); d.Allowed {
			t.Fatalf("Acquire(1) beyond the limit = %+v", d)
		}
		// A limit raised by this client is seen at once...
		if err := c.SetLimit(ctx, r, "u", 4); err != nil {
			t.Fatal(err)
		}
		if d := acquire(t, c, r, "u", 1); !d.Allowed {
			t.Fatalf("Acquire after a raise here = %+v", d)
		}
		acquire(t, c, r, "u", 1) // drained again, and learnt
		// ... and one raised elsewhere within a second.
		if err := other.SetLimit(ctx, r, "u", 5); err != nil {
			t.Fatal(err)
		}
		b.Advance(t, time.Second)
		if b.Real {
			time.Sleep(100 * time.Millisecond)
		}
		if d := acquire(t, c, r, "u", 1); !d.Allowed {
			t.Fatalf("Acquire a second after a raise elsewhere = %+v", d)
		}
	})
}
