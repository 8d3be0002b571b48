package root

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
)

// End to end: the audit trail (tblimit usage) shows the holds before, and
// the JSON has the documented fields.
func TestUsersReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "2")
	e.ok("users", "add", "api", "alice")
	e.code(cmdutil.ExitOK, "acquire", "api", "alice")
	e.code(cmdutil.ExitOK, "acquire", "api", "alice")
	e.code(cmdutil.ExitDenied, "acquire", "api", "alice")
	var m map[string]json.RawMessage
	r := e.code(cmdutil.ExitOK, "-o", "json", "users", "reset", "api", "alice")
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"available", "ended", "in_flight", "limit", "next_release_seconds", "next_release_units", "reset_after_seconds", "resource", "user"}
	if !slices.Equal(keys, want) || string(m["ended"]) != "2" || string(m["available"]) != "2" {
		t.Fatalf("users reset: %s; want fields %v, ended 2, available 2", r.stdout, want)
	}
	e.code(cmdutil.ExitOK, "acquire", "api", "alice")
	if out := e.ok("users", "reset", "api", "alice"); !strings.Contains(out, "1 hold voided") {
		t.Errorf("users reset (text) = %q", out)
	}
	e.code(cmdutil.ExitError, "users", "reset", "api", "nobody")
}
