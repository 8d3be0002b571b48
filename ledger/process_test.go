package ledger_test

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// Two processes share a user: the one that did not take the units learns
// of them from the cluster's denial, scans them once, and then reports
// when they return and denies locally, as the other does.
func TestProcessesShareAUser(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		p1, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 10})
		p2 := ledger.New(b.Client)
		if err := p1.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 10}); err != nil {
			t.Fatal(err)
		}
		first := acquire(t, p1, r, "u", 10)
		d := acquire(t, p2, r, "u", 1) // the units p2 never saw taken
		if d.Allowed || d.Reason != ledger.LimitExceeded || d.Remaining != 0 || d.RetryAfter <= 0 {
			t.Fatalf("p2's first denial = %+v", d)
		}
		d = acquire(t, p2, r, "u", 1) // after a scan in the background: exact
		wantRetry := time.Duration(first.Timestamp + uint64(time.Hour) - d.Timestamp)
		if d.Allowed || d.Limit != 10 || d.Remaining != 0 || d.RetryAfter != wantRetry {
			t.Fatalf("p2's second denial = %+v, want 0 of 10 left, RetryAfter %v (p1's hold)", d, wantRetry)
		}
		before := p2.Stats()
		for i := 0; i < 20; i++ {
			if d := acquire(t, p2, r, "u", 1); d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > time.Hour {
				t.Fatalf("p2's local denial = %+v", d)
			}
		}
		if creates := p2.Stats().CreateTransfers.Events - before.CreateTransfers.Events; creates != 0 {
			t.Fatalf("p2 sent %d creates for a user it knows is drained", creates)
		}
	})
}
