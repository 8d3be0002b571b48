package ledger_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

var updateRequests = flag.Bool("update-requests", false, "rewrite testdata/requests.txt with what the calls sent")

// What a fixed sequence of calls sends to the cluster, one call at a time,
// in each mode: requests and events per operation (ca create_accounts, ct
// create_transfers, la lookup_accounts, lt lookup_transfers, gat
// get_account_transfers, qa query_accounts, qt query_transfers), and the
// decisions made without I/O. It is compared with testdata/requests.txt:
// a change to the decision path that sends more, or less, shows here, and
// is accepted by running the test with -update-requests.
func TestRequestsPerCall(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	modes := []struct {
		name string
		opt  []ledger.Option
	}{
		{"plain", nil},
		{"exact", []ledger.Option{ledger.WithExactDecisions()}},
		{"coalesce", []ledger.Option{ledger.WithCoalescing(0)}},
		{"lease", []ledger.Option{ledger.WithLeases(ledger.Leases{Lifetime: time.Hour})}},
	}
	for _, m := range modes {
		clock := embedded.NewManualClock(time.Unix(1_800_000_000, 0))
		c := ledger.New(embedded.New(embedded.WithClock(clock)), append(m.opt, ledger.WithNow(clock.Now))...)
		r := ledger.Resource{Name: "req", Ledger: 1, Kind: ledger.KindRequests, Window: time.Minute, DefaultLimit: 5, Lazy: true}
		money := ledger.Resource{Name: "usd", Ledger: 2, Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 500, Currency: 3}
		must(t, c.CreateResource(ctx, r))
		must(t, c.CreateResource(ctx, money))
		must(t, c.Provision(ctx, money, ledger.UserLimit{Key: "payer", Limit: 500}))
		must(t, c.Fund(ctx, 3, ledger.Request{User: "payer", Amount: 1000}))
		must(t, c.Provision(ctx, money, ledger.UserLimit{Key: "shop", Limit: 1}))
		base := c.Stats()
		phase := func(name string, f func()) {
			f()
			s := c.Stats()
			fmt.Fprintf(&out, "%-8s %-14s ca %d/%d ct %d/%d la %d/%d lt %d/%d gat %d/%d qa %d/%d qt %d/%d local %d lease %d\n", m.name, name,
				s.CreateAccounts.Requests-base.CreateAccounts.Requests, s.CreateAccounts.Events-base.CreateAccounts.Events,
				s.CreateTransfers.Requests-base.CreateTransfers.Requests, s.CreateTransfers.Events-base.CreateTransfers.Events,
				s.LookupAccounts.Requests-base.LookupAccounts.Requests, s.LookupAccounts.Events-base.LookupAccounts.Events,
				s.LookupTransfers.Requests-base.LookupTransfers.Requests, s.LookupTransfers.Events-base.LookupTransfers.Events,
				s.GetAccountTransfers.Requests-base.GetAccountTransfers.Requests, s.GetAccountTransfers.Events-base.GetAccountTransfers.Events,
				s.QueryAccounts.Requests-base.QueryAccounts.Requests, s.QueryAccounts.Events-base.QueryAccounts.Events,
				s.QueryTransfers.Requests-base.QueryTransfers.Requests, s.QueryTransfers.Events-base.QueryTransfers.Events,
				s.LocalDenials-base.LocalDenials, s.LeaseAdmissions-base.LeaseAdmissions)
			base = s
		}
		phase("first sights", func() {
			for i := range 20 {
				_, err := c.Acquire(ctx, r, ledger.Request{User: fmt.Sprintf("new-%d", i), Amount: 1})
				must(t, err)
			}
		})
		phase("known keys", func() {
			for i := range 40 {
				_, err := c.Acquire(ctx, r, ledger.Request{User: fmt.Sprintf("new-%d", i%20), Amount: 1})
				must(t, err)
			}
		})
		phase("to the limit", func() {
			for range 10 {
				_, err := c.Acquire(ctx, r, ledger.Request{User: "hot", Amount: 1})
				must(t, err)
			}
		})
		phase("with IDs", func() {
			for i := range 6 {
				_, err := c.Acquire(ctx, r, ledger.Request{User: "ids", Amount: 1, ID: ledger.KeyID(fmt.Sprintf("id-%d", i%4))})
				must(t, err)
			}
		})
		phase("all", func() {
			for i := range 5 {
				_, err := c.AcquireAll(ctx, []ledger.Part{
					{Resource: r, Request: ledger.Request{User: "both", Amount: 1}},
					{Resource: money, Request: ledger.Request{User: "payer", Amount: uint64(10 + i)}},
				})
				must(t, err)
			}
		})
		phase("payments", func() {
			for i := range 5 {
				_, err := c.Pay(ctx, money, ledger.Payment{From: "payer", To: "shop", Amount: 100, ID: ledger.KeyID(fmt.Sprintf("pay-%d", i%4))})
				must(t, err)
			}
		})
		phase("reserve", func() {
			rv, err := c.Reserve(ctx, r, ledger.Request{User: "rsv", Amount: 3})
			must(t, err)
			if rv != nil && rv.OK() {
				err := rv.Commit(ctx)
				must(t, err)
			}
		})
		phase("check", func() {
			for i := range 5 {
				_, err := c.Check(ctx, r, ledger.Request{User: fmt.Sprintf("new-%d", i), Amount: 1})
				must(t, err)
				_, err = c.Check(ctx, r, ledger.Request{User: fmt.Sprintf("never-%d", i), Amount: 1})
				must(t, err)
			}
		})
		clock.Advance(2 * time.Minute)
		phase("after window", func() {
			for i := range 10 {
				_, err := c.Acquire(ctx, r, ledger.Request{User: "hot", Amount: 1})
				_ = i
				must(t, err)
			}
		})
		c.Close()
	}

	const golden = "testdata/requests.txt"
	if *updateRequests {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("the calls sent:\n%s\nwant (%s):\n%s", out.Bytes(), golden, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
