package root

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
)

// Windows with days and more ("1d12h") work in flags and files; one too
// long names the largest window.
func TestWindowsWithDays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var r cmdutil.ResourceJSON
	e.json(cmdutil.ExitOK, &r, "resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1d12h", "--limit", "10")
	if r.WindowSeconds != 36*3600 {
		t.Errorf("--window 1d12h: %+v, want 129600 seconds", r)
	}
	if out := e.ok("resources", "list"); !strings.Contains(out, "\t1d12h\t") {
		t.Errorf("resources list = %q, want the window as 1d12h", out)
	}
	res := e.code(cmdutil.ExitUsage, "resources", "create", "x", "--kind", "requests", "--ledger", "2", "--window", "50000d", "--limit", "1")
	if !strings.Contains(res.stderr, `--window "50000d": longer than the largest window (49710d6h28m15s)`) {
		t.Errorf("--window 50000d: stderr %q, want the largest window named", res.stderr)
	}
	yml := filepath.Join(t.TempDir(), "l.yaml")
	if err := os.WriteFile(yml, []byte("resources:\n  - {name: b, kind: bytes, ledger: 2, window: 2d30m, default_limit: 5}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ok("apply", "-f", yml)
	e.json(cmdutil.ExitOK, &r, "resources", "show", "b")
	if r.WindowSeconds != 48*3600+1800 {
		t.Errorf("window: 2d30m in a file: %+v", r)
	}
}
