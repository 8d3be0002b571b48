package ratelimit

import (
	"context"
	"testing"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

func TestRuleLedgerCollision(t *testing.T) {
	src := map[string][]byte{"a.yaml": []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n")}
	cfg, err := ParseConfig([]string{"a.yaml"}, src)
	if err != nil {
		t.Fatal(err)
	}
	rule := cfg.Rules()[0]
	home := resourceOf(rule.spec, rule.Unit)
	c := ledger.New(embedded.New())
	ctx := context.Background()
	// Another resource already holds the ledger the rule's hash names.
	squatter := ledger.Resource{Name: "squatter", Ledger: home.Ledger, Kind: ledger.KindRequests, Window: home.Window, DefaultLimit: 9}
	if err := c.CreateResource(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second service, or a restart, finds the same ledger
		svc, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Load(ctx, cfg); err != nil {
			t.Fatalf("Load with the rule's ledger taken = %v", err)
		}
		got, _ := svc.Resource(rule)
		if want := nextLedger(home.Ledger); got.Ledger != want || got.Name != home.Name {
			t.Errorf("the rule's resource = %v, want %s on ledger %d", got, home.Name, want)
		}
	}
	if r, err := c.Resource(ctx, home.Ledger); err != nil || r != squatter {
		t.Errorf("the squatter's ledger now holds %v, %v; want it untouched", r, err)
	}
}
