package ledger_test

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// A read of an account's transfers or of a ledger's accounts ends on the
// first page shorter than asked: a reply holds as many as asked while there
// are more, on a --development server too (its 32 KiB bound is on
// requests), so a read that fits one page costs one request and not a
// second, empty one. (Audit reads twice: the transfers, then any after
// the limit it read; see Client.audit.)
func TestReadsThatFitAPageTakeOneRequest(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		const taken = 300 // more than a --development request holds
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: taken})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: taken}, ledger.UserLimit{Key: "v", Limit: taken}); err != nil {
			t.Fatal(err)
		}
		for range taken {
			acquire(t, c, r, "u", 1)
		}
		pages := func(name string, want uint64, read func() error, op func(ledger.Stats) ledger.OpStats) {
			t.Helper()
			before := op(c.Stats())
			if err := read(); err != nil {
				t.Fatalf("%s error = %v", name, err)
			}
			if n := op(c.Stats()).Requests - before.Requests; n != want {
				t.Errorf("%s sent %d requests, want %d", name, n, want)
			}
		}
		transfers := func(s ledger.Stats) ledger.OpStats { return s.GetAccountTransfers }
		accounts := func(s ledger.Stats) ledger.OpStats { return s.QueryAccounts }
		pages("History", 1, func() error {
			h, err := c.History(ctx, r, "u", time.Time{}, time.Time{}, 0)
			if err == nil && len(h) != taken {
				t.Errorf("History has %d admissions, want %d", len(h), taken)
			}
			return err
		}, transfers)
		pages("History(max 3)", 1, func() error {
			_, err := c.History(ctx, r, "u", time.Time{}, time.Time{}, 3)
			return err
		}, transfers)
		pages("Audit", 2, func() error {
			a, err := c.Audit(ctx, r, "u", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
			if err == nil && a.MostInWindow != taken {
				t.Errorf("Audit.MostInWindow = %d, want %d", a.MostInWindow, taken)
			}
			return err
		}, transfers)
		pages("Users", 1, func() error {
			us, err := c.Users(ctx, r)
			if err == nil && len(us) != 2 {
				t.Errorf("Users has %d users, want 2", len(us))
			}
			return err
		}, accounts)
	})
}

// A Client that learnt to ask for small pages (the client library refused
// a larger limit) still reads every page: Reset voids every hold, not the
// first page's.
func TestSmallPagesAreReadToTheEnd(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		const taken = 40
		_, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: taken})
		c := ledger.New(smallPages{b.Client, 16})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: taken}); err != nil {
			t.Fatal(err)
		}
		for range taken {
			acquire(t, c, r, "u", 1)
		}
		if n, err := c.Reset(ctx, r, "u"); err != nil || n != taken {
			t.Fatalf("Reset = %d, %v; want %d holds voided", n, err, taken)
		}
		if u, err := c.Inspect(ctx, r, "u"); err != nil || u.Available != taken {
			t.Fatalf("Inspect after Reset = %+v, %v; want all %d available", u, err, taken)
		}
	})
}
