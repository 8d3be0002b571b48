package ledger_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// Keys longer than 16 bytes, a UUID's 36 among them, are listed by name,
// on both engines and by any Client: they live in the cluster.
func TestLongKeysAreListed(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Minute, DefaultLimit: 5, Lazy: true})
		keys := []string{"short", "exactly-16-bytes", "6f1c2d3e-4b5a-4c6d-8e7f-901a2b3c4d5e", "é" + strings.Repeat("ü", 40), strings.Repeat("k", ledger.MaxKeyLen)}
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: keys[0], Limit: 5}, ledger.UserLimit{Key: keys[1], Limit: 5}); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys[2:] {
			acquire(t, c, r, k, 1) // lazy: provisioned within its first decision
		}
		other := ledger.New(b.Client) // another process's Client
		us, err := other.Users(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, u := range us {
			got = append(got, u.Key)
		}
		slices.Sort(got)
		want := slices.Clone(keys)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("Users = %q, want %q", got, want)
		}
	})
}

// A payee's long key is named in the history of the payer.
func TestLongPayeeInHistory(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 1000})
		payee := "merchant-6f1c2d3e-4b5a-4c6d-8e7f-901a2b3c4d5e"
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "cust", Limit: 1000}, ledger.UserLimit{Key: payee}); err != nil {
			t.Fatal(err)
		}
		if err := c.Fund(ctx, r.Currency, ledger.Request{User: "cust", Amount: 100}); err != nil {
			t.Fatal(err)
		}
		if d, err := c.Pay(ctx, r, ledger.Payment{From: "cust", To: payee, Amount: 60}); err != nil || !d.Allowed {
			t.Fatalf("Pay = %+v, %v", d, err)
		}
		h, err := c.History(ctx, r, "cust", time.Time{}, time.Time{}, 0)
		if err != nil || len(h) != 1 || h[0].Payment == nil || h[0].Payment.ToKey != payee {
			t.Fatalf("History = %+v, %v; want the payment to %q", h, err, payee)
		}
	})
}
