package ledger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// A Client whose cache of users holds few of them decides every user as
// the cluster holds it: a lazy user dropped from the cache carries its
// provisioning again and is credited once all the same, and no user is
// admitted past its limit.
func TestSmallUserCache(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		_, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 3, Lazy: true})
		const users = 200
		sights := func(c *ledger.Client, prefix string) uint64 {
			t.Helper()
			for round := range 4 {
				for i := range users {
					d, err := c.Acquire(ctx, r, ledger.Request{User: fmt.Sprint(prefix, i), Amount: 1})
					if want := round < 3; err != nil || d.Allowed != want {
						t.Fatalf("round %d, user %s%d: %+v, %v; want allowed %v", round, prefix, i, d, err, want)
					}
				}
			}
			for i := range users {
				a, err := c.Audit(ctx, r, fmt.Sprint(prefix, i), time.Time{}, time.Time{})
				if err != nil || !a.OK() || a.Limit != 3 || a.Holds != 3 {
					t.Fatalf("Audit(%s%d) = %+v, %v; want 3 holds under a limit of 3, credited once", prefix, i, a, err)
				}
			}
			return c.Stats().CreateAccounts.Events
		}
		// 64 users at most (one a shard): the same users provisioned again
		// and again, where the default cache provisions each once.
		small, all := sights(ledger.New(b.Client, ledger.WithUserCache(1)), "s"), sights(ledger.New(b.Client), "d")
		if all != users || small <= 2*users {
			t.Fatalf("accounts sent for %d users deciding 4 times: %d with a cache of 64 users, %d with the default; want more than %d and %d",
				users, small, all, 2*users, users)
		}
	})
}

func TestUserCacheOfNoneIsRefused(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("WithUserCache(0) did not panic")
		}
	}()
	ledger.New(nil, ledger.WithUserCache(0))
}
