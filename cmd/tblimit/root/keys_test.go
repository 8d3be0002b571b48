package root

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/cmd/tblimit/users"
)

// One key rule (ledger.NormalizeKey) for arguments, CSV and YAML: a key is
// accepted or refused the same way everywhere, refusals name the problem
// (and file:line), and nothing is written.
func TestKeyRuleEverywhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "10")
	dir := t.TempDir()
	write := func(name, content string) string { return writeTestFile(t, dir, name, content) }
	leadCSV := write("lead.csv", "key,limit\n alice,10\n")
	trailCSV := write("trail.csv", "bob,1\nalice ,10\n")
	tabCSV := write("tab.csv", "a\tb,1\n")
	spaceYAML := write("space.yaml", "resources:\n  - name: api\n    kind: requests\n    ledger: 1\n    window: 1m\n    default_limit: 10\n    users:\n      - key: \" alice\"\n")
	nfdCSV := write("nfd.csv", "\u00e9,1\ne\u0301,2\n")
	before := e.dataBytes()
	for _, c := range []struct {
		code cmdutil.ExitCode
		args []string
		want string
	}{
		{cmdutil.ExitUsage, []string{"users", "add", "api", " alice"}, `KEY: " alice" begins or ends with white space`},
		{cmdutil.ExitUsage, []string{"users", "add", "api", "alice "}, `KEY: "alice " begins or ends with white space`},
		{cmdutil.ExitUsage, []string{"users", "add", "api", "a\tb"}, `KEY: "a\tb" has a control character`},
		{cmdutil.ExitUsage, []string{"users", "add", "api", "a\nb"}, "control character"},
		{cmdutil.ExitUsage, []string{"users", "add", "api", "\xff"}, "not valid UTF-8"},
		{cmdutil.ExitUsage, []string{"acquire", "api", " alice"}, `USER: " alice" begins or ends with white space`},
		{cmdutil.ExitUsage, []string{"users", "set-limit", "api", " alice", "3"}, "white space"},
		{cmdutil.ExitUsage, []string{"usage", "api", "alice\r"}, "control character"},
		{cmdutil.ExitError, []string{"users", "import", "api", leadCSV}, `lead.csv:2: " alice" begins or ends with white space`},
		{cmdutil.ExitError, []string{"users", "import", "api", trailCSV}, `trail.csv:2: "alice " begins or ends with white space`},
		{cmdutil.ExitError, []string{"users", "import", "api", tabCSV}, "tab.csv:1: "},
		{cmdutil.ExitError, []string{"users", "import", "api", nfdCSV}, `nfd.csv:2: user "é" is also on line 1`},
		{cmdutil.ExitError, []string{"apply", "-f", spaceYAML}, `space.yaml:8: " alice" begins or ends with white space`},
	} {
		r := e.code(c.code, c.args...)
		if !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("tblimit %q: stderr %q, want one line containing %q", c.args, r.stderr, c.want)
		}
	}
	if !bytes.Equal(before, e.dataBytes()) {
		t.Fatalf("refused keys wrote to the data file")
	}

	// "é" as one character (NFC) or as "e" and an accent (NFD) is one user.
	e.ok("users", "add", "api", "e\u0301")
	var u users.UserJSON
	e.json(cmdutil.ExitOK, &u, "users", "show", "api", "\u00e9")
	if u.User != "\u00e9" || u.Limit != 10 {
		t.Errorf("users show in NFC after users add in NFD = %+v", u)
	}
	e.code(cmdutil.ExitOK, "acquire", "api", "e\u0301")
	var list users.ListJSON
	e.json(cmdutil.ExitOK, &list, "users", "list", "api")
	if len(list.Users) != 1 || list.Users[0].InFlight != 1 {
		t.Errorf("users list = %+v, want one user é with 1 in flight", list)
	}
}

// users list prints one line of four columns per user, whatever the key.
func TestUsersListColumns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "10")
	keys := []string{"a b", "ü", `"q"`, "x,y", "#"}
	for _, k := range keys {
		e.ok("users", "add", "api", k)
	}
	lines := strings.Split(strings.TrimSuffix(e.ok("users", "list", "api"), "\n"), "\n")
	if len(lines) != len(keys) {
		t.Fatalf("users list printed %d lines for %d users: %q", len(lines), len(keys), lines)
	}
	for i, l := range lines {
		if f := strings.Split(l, "\t"); len(f) != 4 || f[0] != cmdutil.DisplayKey(keys[i]) {
			t.Errorf("line %d = %q, want 4 columns starting with %q", i, l, cmdutil.DisplayKey(keys[i]))
		}
	}
}
