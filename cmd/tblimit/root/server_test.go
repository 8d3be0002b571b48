package root

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
)

// While tblimit serve holds the embedded engine's data file, every other
// command acts through it with --server: a money resource, a payer and a
// new payee are created, funded and paid with no restart; a fund retried
// under its ID moves money once; a token without admin on "*" is refused.
func TestCommandsThroughServe(t *testing.T) {
	e := newRealTimeEnv(t)
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	cmdtest.WriteFile(t, tokens, "tokens:\n  - {name: ops, token: ops-secret, allow: {admin: \"*\"}}\n  - {name: shop, token: shop-secret, allow: {decide: \"*\", admin: [usd-day]}}\n")

	addr := startServe(t, e, "--api-tokens", tokens)

	// The data file is serve's: the error says how to reach it.
	if r := e.code(cmdutil.ExitError, "users", "list", "usd-day"); !strings.Contains(r.stderr, "--server ADDR") {
		t.Errorf("a command on the data file serve holds: stderr %q, want the --server hint", r.stderr)
	}

	ops := &cliEnv{t: t, ctx: t.Context(), base: []string{"--server", addr}}
	t.Setenv(cmdutil.TokenEnv, "ops-secret")
	ops.ok("resources", "create", "usd-day", "--kind", "money", "--ledger", "7", "--currency", "840", "--window", "1d", "--limit", "100000")
	ops.ok("users", "add", "usd-day", "alice")
	ops.ok("users", "add", "usd-day", "merchant-42")
	const id = "0123456789abcdef0123456789abcdef"
	for range 2 {
		ops.ok("fund", "usd-day", "alice", "5000", "--id", id)
	}
	ops.ok("pay", "usd-day", "alice", "merchant-42", "1200")
	var alice, merchant struct {
		Funds *uint64 `json:"funds"`
	}
	for _, u := range []struct {
		key  string
		into any
	}{{"alice", &alice}, {"merchant-42", &merchant}} {
		out := ops.ok("-o", "json", "users", "show", "usd-day", u.key)
		if err := json.Unmarshal([]byte(out), u.into); err != nil {
			t.Fatal(err)
		}
	}
	if alice.Funds == nil || *alice.Funds != 3800 || merchant.Funds == nil || *merchant.Funds != 1200 {
		t.Fatalf("funds after a fund sent twice and a payment: alice %v, merchant %v; want 3800 and 1200", alice.Funds, merchant.Funds)
	}
	if out := ops.ok("history", "usd-day", "alice"); !strings.Contains(out, "1200") {
		t.Errorf("history through serve = %q, want the payment's hold", out)
	}

	t.Setenv(cmdutil.TokenEnv, "shop-secret")
	if r := ops.code(cmdutil.ExitError, "users", "list", "usd-day"); !strings.Contains(r.stderr, `lacks the admin permission on resource "*"`) || !strings.Contains(r.stderr, `admin on "*"`) {
		t.Errorf("a token with admin on one resource: stderr %q", r.stderr)
	}
	t.Setenv(cmdutil.TokenEnv, "")
	if r := ops.code(cmdutil.ExitError, "users", "list", "usd-day"); !strings.Contains(r.stderr, "no bearer token") || !strings.Contains(r.stderr, "$"+cmdutil.TokenEnv) {
		t.Errorf("no token: stderr %q", r.stderr)
	}
	if r := ops.code(cmdutil.ExitUsage, "--data", e.data, "users", "list", "usd-day"); !strings.Contains(r.stderr, "--data is not for it") {
		t.Errorf("--server with --data: stderr %q", r.stderr)
	}
	if r := ops.code(cmdutil.ExitUsage, "serve", "--api"); !strings.Contains(r.stderr, "--server is for the commands") {
		t.Errorf("serve --server: stderr %q", r.stderr)
	}
}
