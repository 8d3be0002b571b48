package ledger_test

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// A process that has not read a user yet (it just started) answers a
// denial with the user's own limit, not the resource's default: an amount
// over that limit can never fit, and says so at once.
func TestDenialOfAUserNotReadYet(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 100, Lazy: true})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 50}); err != nil {
			t.Fatal(err)
		}
		restarted := ledger.New(b.Client, ledger.WithNow(b.Now))
		d, err := restarted.Acquire(ctx, r, ledger.Request{User: "u", Amount: 60})
		if err != nil || d.Allowed || d.Limit != 50 || d.RetryAfter >= 0 {
			t.Fatalf("Acquire(60) of a limit of 50, by a Client that never read the user = %+v, %v; want denied, limit 50, never to fit", d, err)
		}
		// The same Client admits under that limit from then on.
		if d, err := restarted.Acquire(ctx, r, ledger.Request{User: "u", Amount: 10}); err != nil || !d.Allowed || d.Limit != 50 || d.Remaining != 40 {
			t.Fatalf("Acquire(10) after = %+v, %v; want allowed, 40 of 50 left", d, err)
		}
	})
}
