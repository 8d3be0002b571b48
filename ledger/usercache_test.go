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
		c := ledger.New(b.Client, ledger.WithUserCache(1)) // a user a shard
		const users = 200
		for round := range 4 {
			for i := range users {
				d, err := c.Acquire(ctx, r, ledger.Request{User: fmt.Sprint("u", i), Amount: 1})
				if want := round < 3; err != nil || d.Allowed != want {
					t.Fatalf("round %d, user %d: %+v, %v; want allowed %v", round, i, d, err, want)
				}
			}
		}
		for i := range users {
			a, err := c.Audit(ctx, r, fmt.Sprint("u", i), time.Time{}, time.Time{})
			if err != nil || !a.OK() || a.Limit != 3 || a.Holds != 3 {
				t.Fatalf("Audit(u%d) = %+v, %v; want 3 holds under a limit of 3, credited once", i, a, err)
			}
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
