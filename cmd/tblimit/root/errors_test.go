package root

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// Every error path prints one line that starts with the one prefix
// "tblimit: ", never a package's ("tblimit: ledger: ...").
func TestErrorsHaveOnePrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "10")
	e.ok("resources", "create", "usd", "--kind", "money", "--ledger", "3", "--currency", "840", "--window", "1d", "--limit", "1000")
	e.ok("users", "add", "usd", "alice")
	for _, args := range [][]string{
		{"acquire", "api", "bob"},
		{"acquire", "nope", "bob"},
		{"users", "show", "api", "bob"},
		{"users", "set-limit", "api", "bob", "3"},
		{"usage", "api", "bob"},
		{"fund", "usd", "bob", "1"},
		{"pay", "usd", "alice", "bob", "1"},
		{"pay", "usd", "bob", "alice", "1"},
		{"resources", "create", "x", "--kind", "requests", "--ledger", "9", "--window", "0s", "--limit", "1"},
		{"resources", "create", "x!", "--kind", "requests", "--ledger", "9", "--window", "1s", "--limit", "1"},
		{"resources", "create", "x", "--kind", "money", "--ledger", "9", "--currency", "9", "--window", "1s", "--limit", "1"},
	} {
		r := e.run(args...)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code == cmdutil.ExitOK || len(lines) != 1 || !strings.HasPrefix(lines[0], "tblimit: ") || strings.Contains(r.stderr, "ledger: ") {
			t.Errorf("tblimit %s: stderr %q, want an error: one line with one prefix", strings.Join(args, " "), r.stderr)
		}
	}
	// The data file in use: the embedded engine's prefix goes too.
	held, err := embedded.Open(e.data)
	if err != nil {
		t.Fatal(err)
	}
	r := e.code(cmdutil.ExitError, "resources", "list")
	held.Close()
	if strings.Contains(r.stderr, "embedded: ") || strings.Count(r.stderr, "tblimit: ") != 1 {
		t.Errorf("data file in use: stderr %q, want one prefix", r.stderr)
	}
	// A file that is not a journal at all.
	bad := filepath.Join(t.TempDir(), "bad.journal")
	if err := os.WriteFile(bad, []byte("not a journal, not at all, no"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.code(cmdutil.ExitError, "--data", bad, "resources", "list")
	if strings.Contains(r.stderr, "embedded: ") || strings.Count(r.stderr, "tblimit: ") != 1 {
		t.Errorf("a damaged data file: stderr %q, want one prefix", r.stderr)
	}
}

func TestUsageMessages(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"users", "add"}, "tblimit: users add: accepts 2 arg(s), received 0 (see tblimit users add --help)\n"},

		{[]string{"acquire", "api", "alice", "--ref", "-1"}, `tblimit: --ref "-1": want a whole number from 0 up` + "\n"},
		{[]string{"--timeout", "abc", "resources", "list"}, `tblimit: --timeout "abc": want a duration such as 500ms, 5s, 1m or 2h` + "\n"},
		{[]string{"resources", "create", "x", "--kind", "requests", "--ledger", "9", "--window", "1m", "--limit", "1__000"}, `tblimit: --limit "1__000": a _ goes between digits`},
		{[]string{"resources", "create", "x", "--kind", "requests", "--ledger", "9", "--window", "1m", "--limit", "_1000"}, `tblimit: --limit "_1000": a _ goes between digits`},
		{[]string{"acquire", "api", "alice", " 1"}, `tblimit: AMOUNT " 1": white space around the number`},
		{[]string{"history", "api", "alice", "--since", "2026-01-01", "--until", "2025-01-01"}, "tblimit: --since 2026-01-01 is after --until 2025-01-01"},
		{[]string{"--addresses", "3000", "resources", "list"}, "tblimit: --data is the embedded engine's data file: with --addresses, there is none"},
	} {
		if r := e.code(cmdutil.ExitUsage, c.args...); !strings.HasPrefix(r.stderr, c.want) {
			t.Errorf("tblimit %q: stderr %q, want it to start %q", c.args, r.stderr, c.want)
		}
	}
	noData := &cliEnv{t: t, ctx: t.Context()}
	if r := noData.code(cmdutil.ExitUsage, "--addresses", "not an address", "resources", "list"); !strings.HasPrefix(r.stderr, `tblimit: --addresses: invalid cluster address "not an address"`) {
		t.Errorf("tblimit --addresses 'not an address': stderr %q", r.stderr)
	}
}
