package ledger_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/testenv"
)

// A check says whether units are available and takes nothing: a key never
// seen has all of its limit and is not provisioned; a drained one is
// denied with when to retry; a user the Client knows is checked without
// any I/O.
func TestCheck(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		_, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 3, Lazy: true})
		c := ledger.New(b.Client, ledger.WithNow(b.Now))
		check := func(key string, amount, plan uint64) ledger.Decision {
			t.Helper()
			d, err := c.Check(ctx, r, ledger.Request{User: key, Amount: amount, Limit: plan})
			if err != nil {
				t.Fatalf("Check(%s, %d) error = %v", key, amount, err)
			}
			return d
		}
		before := c.Stats()
		for _, step := range []struct {
			key              string
			amount, plan     uint64
			allowed          bool
			limit, remaining uint64
		}{
			{"new", 1, 0, true, 3, 3},
			{"new", 3, 0, true, 3, 3},
			{"new", 4, 0, false, 3, 3},
			{"new", 1, 5, true, 5, 5},
		} {
			if d := check(step.key, step.amount, step.plan); d.Allowed != step.allowed || d.Limit != step.limit || d.Remaining != step.remaining || !d.ID.IsZero() {
				t.Errorf("Check(%s, %d, plan %d) = %+v, want allowed %v, %d of %d left, no ID", step.key, step.amount, step.plan, d, step.allowed, step.remaining, step.limit)
			}
		}
		if s := c.Stats(); s.CreateAccounts.Requests != before.CreateAccounts.Requests || s.CreateTransfers.Requests != before.CreateTransfers.Requests {
			t.Errorf("checks wrote: %+v", s)
		}
		if infos, err := c.Users(ctx, r); err != nil || len(infos) != 0 {
			t.Errorf("Users after checks = %v, %v; want none: a check provisions nothing", infos, err)
		}
		for range 3 {
			if d := acquire(t, c, r, "busy", 1); !d.Allowed {
				t.Fatalf("Acquire(busy) = %+v", d)
			}
		}
		before = c.Stats()
		d := check("busy", 1, 0)
		if d.Allowed || d.Reason != ledger.LimitExceeded || d.Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter > time.Hour+time.Second {
			t.Errorf("Check(busy) of a drained user = %+v, want denied, retry within the window", d)
		}
		if _, reads := sent(before, c.Stats()); reads != 0 {
			t.Errorf("Check of a user this Client provisioned and drained: %d reads, want none", reads)
		}
		if u := inspect(t, c, r, "busy"); u.InFlight != 3 {
			t.Errorf("Inspect(busy) after a check = %+v, want the 3 units of its holds, nothing more", u)
		}
		// Another process's checks read the account, in one request.
		other := ledger.New(b.Client, ledger.WithNow(b.Now))
		before = other.Stats()
		if d, err := other.Check(ctx, r, ledger.Request{User: "busy", Amount: 1}); err != nil || d.Allowed || d.Limit != 3 {
			t.Errorf("another Client's Check(busy) = %+v, %v; want denied, limit 3", d, err)
		}
		if after := other.Stats(); after.LookupAccounts.Requests-before.LookupAccounts.Requests > 2 { // the resource's, then the user's
			t.Errorf("another Client's first check: %d lookups, want at most 2", after.LookupAccounts.Requests-before.LookupAccounts.Requests)
		}
		// A non-lazy resource refuses a check of an unknown user.
		_, strict := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 3})
		if _, err := c.Check(ctx, strict, ledger.Request{User: "stranger", Amount: 1}); !errors.Is(err, ledger.ErrUnknownUser) {
			t.Errorf("Check of an unknown user on a non-lazy resource = %v, want ErrUnknownUser", err)
		}
		if _, err := c.Check(ctx, r, ledger.Request{User: "x", Amount: 1, ID: ledger.NewID()}); !errors.Is(err, ledger.ErrInvalidID) {
			t.Errorf("Check with an ID = %v, want ErrInvalidID", err)
		}
	})
}

// Checks in flight at once share one read.
func TestChecksShareARead(t *testing.T) {
	engine := embedded.New()
	defer engine.Close()
	g := &gated{Client: remote{engine}, held: make(chan struct{}), release: make(chan struct{})}
	c := ledger.New(g)
	r := ledger.Resource{Name: "checks", Ledger: 1, Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 3, Lazy: true}
	if err := c.CreateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Check(ctx, r, ledger.Request{User: "first", Amount: 1}); err != nil || !d.Allowed {
		t.Fatalf("Check(first) = %+v, %v", d, err)
	}
	const n = 16
	before := c.Stats()
	var fits atomic.Int64
	behindHeldBatch(t, c, r, g, n, func(i int) {
		d, err := c.Check(patient(t), r, ledger.Request{User: fmt.Sprint("new", i), Amount: 3})
		if err != nil {
			t.Error(err)
		}
		if d.Allowed && d.Remaining == 3 {
			fits.Add(1)
		}
	})
	if fits.Load() != n {
		t.Fatalf("%d of %d checks of new keys said 3 of 3 fit, want all", fits.Load(), n)
	}
	if reads := c.Stats().LookupAccounts.Requests - before.LookupAccounts.Requests; reads > 2 {
		t.Errorf("%d checks at once: %d lookup_accounts requests, want one or two", n, reads)
	}
}
