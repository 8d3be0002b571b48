package root

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
)

// An empty list is [] in every command's JSON, never null.
func TestJSONListsAreEmptyNotNull(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	yml := filepath.Join(t.TempDir(), "l.yaml")
	if err := os.WriteFile(yml, []byte("resources:\n  - {name: api, kind: requests, ledger: 1, window: 1m, default_limit: 5}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		code cmdutil.ExitCode
		args []string
		list string
	}{
		{cmdutil.ExitOK, []string{"resources", "list"}, "resources"},
		{cmdutil.ExitOK, []string{"apply", "-f", yml}, "changes"},
		{cmdutil.ExitOK, []string{"apply", "-f", yml, "--dry-run"}, "changes"}, // nothing to do
		{cmdutil.ExitOK, []string{"apply", "-f", yml}, "changes"},              // nothing to do
		{cmdutil.ExitOK, []string{"users", "list", "api"}, "users"},
		{cmdutil.ExitError, []string{"tigerbeetle", "status", "--dir", dir}, "addresses"},
		{cmdutil.ExitError, []string{"tigerbeetle", "status", "--dir", dir}, "replicas"},
		{cmdutil.ExitOK, []string{"tigerbeetle", "down", "--dir", dir}, "addresses"},
	} {
		r := e.code(c.code, append([]string{"-o", "json"}, c.args...)...)
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
			t.Fatalf("tblimit -o json %s: %v: %q", strings.Join(c.args, " "), err, r.stdout)
		}
		if !bytes.HasPrefix(m[c.list], []byte("[")) || strings.Contains(r.stdout, "null") {
			t.Errorf("tblimit -o json %s: %s = %s in %s, want a list, and no null anywhere", strings.Join(c.args, " "), c.list, m[c.list], r.stdout)
		}
	}
}
