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
	// Every count below holds while the units taken first are held: the
	// cluster's timestamps say when the work outlasted the window, and
	// InTime then runs it again with a longer one.
	eachInTime(t, 2*time.Second, time.Minute, drainedUsers)
}

// drainedUsers runs the scenario with window w; false: the work outlasted it.
func drainedUsers(t *testing.T, b *testenv.Backend, w time.Duration) bool {
	t.Helper()
	c, r := setup(t, b, ledger.Resource{Window: w, DefaultLimit: 3, Lazy: true})
	other := ledger.New(b.Client) // another process
	taken := acquire(t, c, r, "u", 2)
	b.Advance(t, time.Second)
	last := acquire(t, c, r, "u", 1)
	first := acquire(t, c, r, "u", 1) // denied: learns that u is drained
	if !testenv.Within(taken.Timestamp, first.Timestamp, w) {
		return false
	}
	if first.Allowed || first.RetryAfter <= 0 || first.RetryAfter > w-time.Second+10*time.Millisecond {
		t.Fatalf("first denial = %+v, want RetryAfter in (0, %v]", first, w-time.Second)
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
	beyond := acquire(t, c, r, "u", 1)
	if !testenv.Within(last.Timestamp, beyond.Timestamp, w) {
		return false // the third unit has returned too
	}
	if beyond.Allowed {
		t.Fatalf("Acquire(1) beyond the limit = %+v", beyond)
	}
	if d := acquire(t, c, r, "u", 1); d.Allowed { // denied locally again
		t.Fatalf("Acquire(1) beyond the limit again = %+v", d)
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
	return true
}
