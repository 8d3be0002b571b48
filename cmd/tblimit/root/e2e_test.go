package root

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/fund"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/cmd/tblimit/resources"
	"github.com/tblimit/tblimit/cmd/tblimit/tigerbeetle"
	"github.com/tblimit/tblimit/cmd/tblimit/usage"
	"github.com/tblimit/tblimit/cmd/tblimit/users"
	"github.com/tblimit/tblimit/internal/launch"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// acceptRequests is the first acceptance scenario: 5 requests per window w;
// the sixth is denied (exit 3); once the window has passed requests are
// admitted again. wait lets the time pass. resource names the resource it
// creates on ledger ledgerNo.
//
// It checks every count against the cluster's own timestamps: the counts
// hold while all five admissions fall within one window of the first. When
// the commands outlasted w (a slow machine or server: each command against
// a real server connects anew) it returns false having failed nothing, so
// that the caller can run it again with a longer window.
func acceptRequests(t *testing.T, e *cliEnv, resource, ledgerNo string, w time.Duration, wait func(time.Duration)) bool {
	t.Helper()
	e.ok("resources", "create", resource, "--kind", "requests", "--ledger", ledgerNo, "--window", w.String(), "--limit", "5")
	e.ok("users", "add", resource, "alice")
	var first time.Time
	within := func(d cmdutil.DecisionJSON) bool {
		t.Helper()
		at, err := time.Parse(time.RFC3339Nano, d.Time)
		if err != nil {
			t.Fatalf("decision time %q: %v", d.Time, err)
		}
		if first.IsZero() {
			first = at
		}
		if at.Sub(first) >= w {
			t.Logf("with a %v window, a decision came %v after the first: running again with a longer window", w, at.Sub(first))
			return false
		}
		return true
	}
	for i := 1; i <= 5; i++ {
		var d cmdutil.DecisionJSON
		e.json(cmdutil.ExitOK, &d, "acquire", resource, "alice")
		if !within(d) {
			return false
		}
		if !d.Allowed || d.Remaining != uint64(5-i) || d.Limit != 5 {
			t.Fatalf("acquire %d = %+v, want allowed with %d remaining of 5", i, d, 5-i)
		}
	}
	r := e.run("acquire", resource, "alice")
	// The seventh's exit code is checked after its time: a first unit that
	// returned meanwhile admits it, which a longer window cures.
	r7 := e.run("-o", "json", "acquire", resource, "alice")
	var d cmdutil.DecisionJSON
	if err := json.Unmarshal([]byte(r7.stdout), &d); err != nil {
		t.Fatalf("tblimit -o json acquire %s alice = exit %d, %q: %v; stderr %q", resource, r7.code, r7.stdout, err, r7.stderr)
	}
	if !within(d) { // the sixth came before this seventh, so within the window too
		return false
	}
	if r7.code != cmdutil.ExitDenied {
		t.Fatalf("acquire 7 = exit %d, want %d: %+v", r7.code, cmdutil.ExitDenied, d)
	}
	if r.code != cmdutil.ExitDenied || !strings.Contains(r.stdout, "denied (limit exceeded)") || r.stderr != "" {
		t.Fatalf("acquire 6 = exit %d, stdout %q, stderr %q; want a denial on stdout and nothing on stderr", r.code, r.stdout, r.stderr)
	}
	if d.Allowed || d.Reason != "limit_exceeded" || d.RetryAfterSeconds <= 0 || d.RetryAfterSeconds > w.Seconds() {
		t.Fatalf("acquire 7 = %+v, want denied, retry within %v", d, w)
	}
	wait(w) // from after the seventh decision: past the first unit's return
	e.json(cmdutil.ExitOK, &d, "acquire", resource, "alice")
	if !d.Allowed {
		t.Fatalf("acquire after %v = %+v, want allowed", w, d)
	}
	return true
}

// acceptRequestsInTime runs acceptRequests from window w on, doubling the
// window (on a new resource and ledger) while the commands outlast it, up to
// a minute.
func acceptRequestsInTime(t *testing.T, e *cliEnv, w time.Duration, wait func(time.Duration)) {
	t.Helper()
	for i := 1; ; i++ {
		if acceptRequests(t, e, fmt.Sprintf("api%d", i), fmt.Sprint(100+i), w, wait) {
			return
		}
		if w *= 2; w > time.Minute {
			t.Fatalf("the scenario's commands outlasted a %v window", w/2)
		}
	}
}

// acceptMoney is the second acceptance scenario: 1000 per day; fund 5000;
// pay 600 (0), 600 again (3, nothing moved), 400 (0).
func acceptMoney(t *testing.T, e *cliEnv, limitLedger, currency string) {
	t.Helper()
	e.ok("resources", "create", "usd-day", "--kind", "money", "--ledger", limitLedger, "--currency", currency, "--window", "1d", "--limit", "1000")
	e.ok("users", "add", "usd-day", "alice")
	e.ok("users", "add", "usd-day", "shop")
	var f fund.JSON
	e.json(cmdutil.ExitOK, &f, "fund", "usd-day", "alice", "5000")
	if f.Funds != 5000 {
		t.Fatalf("fund = %+v, want alice holding 5000", f)
	}
	funds := func(user string) (limit, available, held uint64) {
		t.Helper()
		var u users.UserJSON
		e.json(cmdutil.ExitOK, &u, "users", "show", "usd-day", user)
		return u.Limit, u.Available, *u.Funds
	}
	for i, step := range []struct {
		amount          string
		code            cmdutil.ExitCode
		alice, shop     uint64
		limitsAvailable uint64
	}{
		{"600", cmdutil.ExitOK, 4400, 600, 400},
		{"600", cmdutil.ExitDenied, 4400, 600, 400},
		{"400", cmdutil.ExitOK, 4000, 1000, 0},
	} {
		var d cmdutil.DecisionJSON
		e.json(step.code, &d, "pay", "usd-day", "alice", "shop", step.amount)
		if d.Allowed != (step.code == cmdutil.ExitOK) || *d.Funds != step.alice {
			t.Fatalf("pay %d (%s) = %+v", i, step.amount, d)
		}
		if _, avail, held := funds("alice"); held != step.alice || avail != step.limitsAvailable {
			t.Fatalf("after pay %d: alice holds %d with %d of her limit available, want %d and %d", i, held, avail, step.alice, step.limitsAvailable)
		}
		if _, _, held := funds("shop"); held != step.shop {
			t.Fatalf("after pay %d: shop holds %d, want %d", i, held, step.shop)
		}
	}
}

func TestAcceptanceRequestRate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Units return exactly one window after their cluster timestamp, which
	// is a little after the clock's reading when the clock stands still.
	if !acceptRequests(t, e, "api", "1", 2*time.Second, func(d time.Duration) { e.clock.Advance(d + time.Millisecond) }) {
		t.Fatal("the manual clock moved by itself")
	}
}

// The same scenario in real time, as a new user runs it by hand: separate
// commands, each opening the data file again.
func TestAcceptanceRequestRateRealTime(t *testing.T) {
	t.Parallel()
	e := newRealTimeEnv(t)
	acceptRequestsInTime(t, e, 2*time.Second, time.Sleep)
}

func TestAcceptanceMoney(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acceptMoney(t, e, "3", "840")
}

// The acceptance scenarios against a real server started with tblimit
// tigerbeetle up; skipped without a tigerbeetle binary.
func TestAcceptanceRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs a real tigerbeetle server")
	}
	if _, err := launch.FindBinary(""); errors.Is(err, launch.ErrNoBinary) {
		t.Skip("no tigerbeetle binary: set $TIGERBEETLE_BIN or put tigerbeetle on PATH (scripts/install-tigerbeetle.sh installs one)")
	}
	t.Setenv(envMain, "1") // tigerbeetle up re-executes this binary as tblimit
	dir := t.TempDir()
	local := &cliEnv{t: t, ctx: t.Context()}
	var st tigerbeetle.ServerJSON
	// The cleanup is registered before up, which may start the server and
	// still fail, and runs on a context of its own: t.Context() is cancelled
	// before cleanups run.
	t.Cleanup(func() {
		down := &cliEnv{t: t, ctx: context.Background()}
		if r := down.run("tigerbeetle", "down", "--dir", dir, "--purge"); r.code != cmdutil.ExitOK {
			t.Errorf("tigerbeetle down = %d: %s", r.code, r.stderr)
		}
	})
	local.json(cmdutil.ExitOK, &st, "tigerbeetle", "up", "--dir", dir, "--port", "0")
	if !st.Running || len(st.Addresses) != 1 {
		t.Fatalf("tigerbeetle up = %+v", st)
	}
	var again tigerbeetle.ServerJSON
	local.json(cmdutil.ExitOK, &again, "tigerbeetle", "status", "--dir", dir)
	if !again.Running || again.Addresses[0] != st.Addresses[0] {
		t.Fatalf("tigerbeetle status = %+v, want it running at %s", again, st.Addresses[0])
	}
	e := &cliEnv{t: t, ctx: t.Context(), base: []string{"--addresses", st.Addresses[0], "--cluster-id", fmt.Sprint(st.ClusterID)}}
	// Each command connects anew (a few hundred ms against a real server): the
	// window grows until the commands fit in it, judged by the cluster's
	// timestamps. Expiry may lag its instant by up to about 100 ms.
	acceptRequestsInTime(t, e, 2*time.Second, func(d time.Duration) { time.Sleep(d + 200*time.Millisecond) })
	acceptMoney(t, e, "3", "840")
}

func TestServerCommandsWithoutBinary(t *testing.T) {
	t.Setenv(launch.EnvBinary, "")
	t.Setenv("PATH", t.TempDir())
	e := &cliEnv{t: t, ctx: t.Context()}
	dir := t.TempDir()
	r := e.code(cmdutil.ExitError, "tigerbeetle", "up", "--dir", dir)
	if !strings.Contains(r.stderr, "scripts/install-tigerbeetle.sh") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("tigerbeetle up without a binary: stderr %q, want one line naming scripts/install-tigerbeetle.sh", r.stderr)
	}
	var st tigerbeetle.ServerJSON
	e.json(cmdutil.ExitError, &st, "tigerbeetle", "status", "--dir", dir)
	if st.Running {
		t.Errorf("status = %+v, want not running", st)
	}
	if out := e.ok("tigerbeetle", "down", "--dir", dir); !strings.Contains(out, "not running") {
		t.Errorf("down = %q, want not running", out)
	}
}

// Provisioning in one command and acquiring in the next: each Run opens the
// data file anew, as separate processes do; expiry follows the clock across
// them.
func TestStateOutlivesCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "upload", "--kind", "bytes", "--ledger", "2", "--window", "1m", "--limit", "10_000_000", "--lazy")
	e.code(cmdutil.ExitOK, "acquire", "upload", "bob", "6000000")
	e.code(cmdutil.ExitDenied, "acquire", "upload", "bob", "5000000")
	e.clock.Advance(30 * time.Second)
	e.code(cmdutil.ExitOK, "acquire", "upload", "bob", "4000000")
	var u usage.JSON
	e.json(cmdutil.ExitOK, &u, "usage", "upload", "bob")
	if len(u.Flights) != 2 || u.InFlight != 10_000_000 || u.Available != 0 {
		t.Fatalf("usage = %+v, want two flights holding the whole limit", u)
	}
	if got := u.Flights[0].ReturnsInSeconds; got < 29.9 || got > 30.1 {
		t.Errorf("the first flight returns in %vs, want 30s", got)
	}
	var show users.UserJSON
	e.json(cmdutil.ExitOK, &show, "users", "show", "upload", "bob")
	if show.NextReleaseUnits != 6_000_000 || show.NextReleaseSeconds < 29.9 || show.NextReleaseSeconds > 30.1 {
		t.Errorf("users show = %+v, want 6000000 back in 30s", show)
	}
	e.clock.Advance(30*time.Second + time.Millisecond)
	e.json(cmdutil.ExitOK, &show, "users", "show", "upload", "bob")
	if show.Available != 6_000_000 {
		t.Errorf("after the window: %+v, want 6000000 available", show)
	}
}

func TestResources(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var created cmdutil.ResourceJSON
	e.json(cmdutil.ExitOK, &created, "resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "10", "--lazy")
	if created.Created == nil || !*created.Created || created.WindowSeconds != 60 || !created.Lazy {
		t.Fatalf("create = %+v", created)
	}
	e.json(cmdutil.ExitOK, &created, "resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "10", "--lazy")
	if *created.Created {
		t.Fatalf("create again = %+v, want created false", created)
	}
	e.ok("resources", "create", "usd", "--kind", "money", "--ledger", "3", "--currency", "840", "--window", "1d", "--limit", "1000")
	before := e.dataBytes()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--kind", "requests", "--ledger", "1", "--window", "2m", "--limit", "10"}, "differs in name (api, not api2), window (1m, not 2m)"},
		{[]string{"--kind", "requests", "--ledger", "840", "--window", "2m", "--limit", "10"}, "currency ledger of resource usd"},
	} {
		r := e.code(cmdutil.ExitError, append([]string{"resources", "create", "api2"}, c.args...)...)
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("create %v: stderr %q, want %q", c.args, r.stderr, c.want)
		}
	}
	r := e.code(cmdutil.ExitError, "resources", "create", "other", "--kind", "bytes", "--ledger", "1", "--window", "1m", "--limit", "10")
	if !strings.Contains(r.stderr, "cannot be changed") {
		t.Errorf("create on a used ledger: %q", r.stderr)
	}
	if !bytes.Equal(before, e.dataBytes()) {
		t.Errorf("refused creates wrote to the data file")
	}
	var list resources.ListJSON
	e.json(cmdutil.ExitOK, &list, "resources", "list")
	if len(list.Resources) != 2 || list.Resources[0].Name != "api" || list.Resources[1].CurrencyLedger != 840 {
		t.Fatalf("list = %+v", list)
	}
	if out := e.ok("resources", "list"); out != "api\trequests\t1\t1m\t10\ttrue\t-\nusd\tmoney\t3\t1d\t1000\tfalse\t840\n" {
		t.Errorf("resources list (not a terminal) = %q, want tab-separated lines", out)
	}
	var show cmdutil.ResourceJSON
	e.json(cmdutil.ExitOK, &show, "resources", "show", "3")
	if show.Name != "usd" {
		t.Errorf("show 3 = %+v, want usd (by ledger number)", show)
	}
}

func TestUsers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "10")
	var u users.UserJSON
	e.json(cmdutil.ExitOK, &u, "users", "add", "api", "alice")
	if !*u.Created || u.Limit != 10 {
		t.Fatalf("add = %+v", u)
	}
	e.json(cmdutil.ExitOK, &u, "users", "add", "api", "alice")
	if *u.Created || u.Limit != 10 {
		t.Fatalf("add again = %+v, want created false", u)
	}
	e.ok("users", "add", "api", "bob", "--limit", "3")
	r := e.code(cmdutil.ExitError, "users", "add", "api", "bob", "--limit", "4")
	if !strings.Contains(r.stderr, "set-limit") {
		t.Errorf("add with another limit: %q, want a hint at set-limit", r.stderr)
	}
	e.code(cmdutil.ExitOK, "acquire", "api", "bob", "3")
	e.json(cmdutil.ExitOK, &u, "users", "set-limit", "api", "bob", "1")
	if u.Limit != 1 {
		t.Fatalf("set-limit = %+v", u)
	}
	e.clock.Advance(time.Minute + time.Millisecond)
	e.code(cmdutil.ExitOK, "acquire", "api", "bob")
	e.code(cmdutil.ExitDenied, "acquire", "api", "bob")
	var list users.ListJSON
	e.json(cmdutil.ExitOK, &list, "users", "list", "api")
	if len(list.Users) != 2 || list.Users[0].User != "alice" || list.Users[1].Limit != 1 || list.Users[1].InFlight != 1 {
		t.Fatalf("list = %+v", list)
	}
	r = e.code(cmdutil.ExitError, "acquire", "api", "carol")
	if !strings.Contains(r.stderr, `unknown user: "carol"`) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("acquire for an unknown user: stderr %q, want one line naming carol", r.stderr)
	}
}

func TestFundIsIdempotentWithID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "usd", "--kind", "money", "--ledger", "3", "--currency", "840", "--window", "1d", "--limit", "1000")
	e.ok("users", "add", "usd", "alice")
	var f fund.JSON
	e.json(cmdutil.ExitOK, &f, "fund", "usd", "alice", "500")
	id := f.ID
	e.json(cmdutil.ExitOK, &f, "fund", "usd", "alice", "500", "--id", id)
	if f.Funds != 500 {
		t.Fatalf("fund retried with --id %s = %+v, want 500 held (applied once)", id, f)
	}
	r := e.code(cmdutil.ExitError, "fund", "usd", "alice", "700", "--id", id)
	if !strings.Contains(r.stderr, "--id was already used") {
		t.Errorf("fund with a used ID and another amount: %q", r.stderr)
	}
	e.json(cmdutil.ExitOK, &f, "fund", "usd", "alice", "1")
	if f.Funds != 501 || f.ID == id {
		t.Fatalf("fund without --id = %+v, want a new ID and 501 held", f)
	}
	r = e.code(cmdutil.ExitError, "fund", "usd", "nobody", "1")
	if !strings.Contains(r.stderr, "tblimit users add usd nobody") {
		t.Errorf("fund of an unknown user: %q", r.stderr)
	}
	e.ok("users", "add", "usd", "shop")
	var d cmdutil.DecisionJSON
	e.json(cmdutil.ExitDenied, &d, "pay", "usd", "shop", "alice", "10")
	if d.Reason != "insufficient_funds" {
		t.Errorf("pay without funds = %+v, want insufficient_funds", d)
	}
}

// Bad input gets a clear error naming the flag, argument, file or line, and
// writes nothing.
func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "10")
	e.ok("resources", "create", "usd", "--kind", "money", "--ledger", "3", "--currency", "840", "--window", "1d", "--limit", "1000")
	e.ok("users", "add", "api", "alice")
	e.ok("users", "add", "usd", "alice")
	dir := t.TempDir()
	write := func(name, content string) string { return writeTestFile(t, dir, name, content) }
	badCSV := write("bad.csv", "key,limit\nbob,5\ncarol,five\n")
	dupCSV := write("dup.csv", "bob,5\ncarol,6\nbob,7\n")
	wideCSV := write("wide.csv", "bob,5,6\n")
	hugeCSV := write("huge.csv", "bob,99999999999999999999\n")
	badYAML := write("bad.yaml", "resources:\n  - name: api2\n    kind: requests\n    ledger: 2\n    window: 0s\n    default_limit: 1\n")
	typoYAML := write("typo.yaml", "resources:\n  - name: api2\n    kind: requests\n    ledger: 2\n    window: 1s\n    default_limt: 1\n")
	changeYAML := write("change.yaml", "resources:\n  - name: api\n    kind: requests\n    ledger: 1\n    window: 2m\n    default_limit: 10\n    users:\n      - key: zed\n")
	before := e.dataBytes()
	for _, c := range []struct {
		code cmdutil.ExitCode
		args []string
		want string
	}{
		{cmdutil.ExitUsage, []string{"acquire", "api", "alice", "0"}, `AMOUNT "0": must be at least 1`},
		{cmdutil.ExitUsage, []string{"acquire", "api", "alice", "-3"}, `"-3": negative numbers are not allowed`},
		{cmdutil.ExitUsage, []string{"acquire", "api", "alice", "99999999999999999999"}, `AMOUNT "99999999999999999999": too large`},
		{cmdutil.ExitUsage, []string{"acquire", "api", "alice", "1.5"}, `AMOUNT "1.5": want a whole number`},
		{cmdutil.ExitUsage, []string{"acquire", "api", ""}, "USER: empty user key"},
		{cmdutil.ExitUsage, []string{"acquire", "api", "alice", "--id", "xyz"}, `--id "xyz"`},
		{cmdutil.ExitError, []string{"acquire", "nope", "alice"}, `unknown resource "nope" (known: api, usd)`},
		{cmdutil.ExitError, []string{"acquire", "api", "bob"}, `unknown user: "bob"`},
		{cmdutil.ExitError, []string{"acquire", "usd", "alice"}, "use tblimit pay"},
		{cmdutil.ExitError, []string{"pay", "api", "alice", "bob", "1"}, "use tblimit acquire"},
		{cmdutil.ExitUsage, []string{"pay", "usd", "alice", "alice", "1"}, "cannot pay itself"},
		{cmdutil.ExitError, []string{"pay", "usd", "alice", "nobody", "1"}, `"nobody" has no account`},
		{cmdutil.ExitUsage, []string{"fund", "usd", "alice", "0"}, `AMOUNT "0"`},
		{cmdutil.ExitUsage, []string{"resources", "create", "x", "--kind", "requests", "--ledger", "9", "--window", "0", "--limit", "1"}, `--window "0"`},
		{cmdutil.ExitUsage, []string{"resources", "create", "x", "--kind", "requests", "--ledger", "9", "--window", "1.5s", "--limit", "1"}, "not a whole number of seconds"},
		{cmdutil.ExitUsage, []string{"resources", "create", "x", "--kind", "requests", "--ledger", "9", "--window", "60", "--limit", "1"}, `give a unit, e.g. 60s`},
		{cmdutil.ExitUsage, []string{"resources", "create", "x", "--kind", "requests", "--ledger", "0", "--window", "1s", "--limit", "1"}, `--ledger "0"`},
		{cmdutil.ExitUsage, []string{"resources", "create", "x", "--kind", "coins", "--ledger", "9", "--window", "1s", "--limit", "1"}, `--kind "coins"`},
		{cmdutil.ExitUsage, []string{"resources", "create", "x", "--kind", "requests", "--ledger", "9", "--window", "1s"}, "--limit is required"},
		{cmdutil.ExitUsage, []string{"resources", "create", "x", "--kind", "money", "--ledger", "9", "--window", "1s", "--limit", "1"}, "--currency is required"},
		{cmdutil.ExitUsage, []string{"resources", "create", "Bad Name", "--kind", "requests", "--ledger", "9", "--window", "1s", "--limit", "1"}, `name "Bad Name"`},
		{cmdutil.ExitUsage, []string{"users", "set-limit", "api", "alice", "-1"}, "negative"},
		{cmdutil.ExitUsage, []string{"users", "set-limit", "api", "alice", "lots"}, `LIMIT "lots"`},
		{cmdutil.ExitError, []string{"users", "import", "api", badCSV}, "bad.csv:3: limit \"five\""},
		{cmdutil.ExitError, []string{"users", "import", "api", dupCSV}, `dup.csv:3: user "bob" is also on line 1`},
		{cmdutil.ExitError, []string{"users", "import", "api", wideCSV}, "wide.csv:1: 3 fields"},
		{cmdutil.ExitError, []string{"users", "import", "api", hugeCSV}, "huge.csv:1: limit"},
		{cmdutil.ExitError, []string{"users", "import", "api", filepath.Join(dir, "missing.csv")}, "missing.csv"},
		{cmdutil.ExitError, []string{"apply", "-f", badYAML}, `bad.yaml:5: window "0s"`},
		{cmdutil.ExitError, []string{"apply", "-f", typoYAML}, `typo.yaml:6: unknown field "default_limt"`},
		{cmdutil.ExitError, []string{"apply", "-f", changeYAML}, "change.yaml:2: resource api"},
		{cmdutil.ExitUsage, []string{"apply"}, "-f/--file is required"},
		{cmdutil.ExitUsage, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{cmdutil.ExitUsage, []string{"users", "frobnicate"}, `unknown command "frobnicate" for "tblimit users"`},
		{cmdutil.ExitUsage, []string{"acquire"}, "accepts between 2 and 3 arg(s)"},
		{cmdutil.ExitUsage, []string{"acquire", "api", "alice", "--bogus"}, "unknown flag: --bogus"},
		{cmdutil.ExitUsage, []string{"-o", "yaml", "resources", "list"}, `--output "yaml"`},
	} {
		r := e.code(c.code, c.args...)
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("tblimit %s: stderr %q, want it to contain %q", strings.Join(c.args, " "), r.stderr, c.want)
		}
		if n := strings.Count(r.stderr, "tblimit:"); n != 1 {
			t.Errorf("tblimit %s: %d error lines on stderr, want 1: %q", strings.Join(c.args, " "), n, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("tblimit %s: stdout %q, want nothing", strings.Join(c.args, " "), r.stdout)
		}
	}
	if !bytes.Equal(before, e.dataBytes()) {
		t.Fatalf("bad input wrote to the data file")
	}
}

func TestEnvironmentVariables(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "env.journal")
	t.Setenv("TBLIMIT_DATA", data)
	t.Setenv("TBLIMIT_OUTPUT", "json")
	e := &cliEnv{t: t, ctx: t.Context()}
	out := e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "10")
	if !json.Valid([]byte(out)) {
		t.Errorf("with TBLIMIT_OUTPUT=json: %q, want JSON", out)
	}
	if _, err := os.Stat(data); err != nil {
		t.Fatalf("TBLIMIT_DATA was not used: %v", err)
	}
	// An explicit flag wins.
	if out := e.ok("-o", "text", "resources", "list"); json.Valid([]byte(out)) || !strings.HasPrefix(out, "api\t") {
		t.Errorf("-o text with TBLIMIT_OUTPUT=json: %q, want text", out)
	}
	other := filepath.Join(dir, "other.journal")
	if out := e.ok("--data", other, "-o", "text", "resources", "list"); out != "" {
		t.Errorf("--data %s with TBLIMIT_DATA set: %q, want the other (empty) file", other, out)
	}
	t.Setenv("TBLIMIT_TIMEOUT", "soon")
	r := e.code(cmdutil.ExitUsage, "resources", "list")
	if !strings.Contains(r.stderr, "$TBLIMIT_TIMEOUT") {
		t.Errorf("a bad TBLIMIT_TIMEOUT: %q, want it named", r.stderr)
	}
	// Without --data nor TBLIMIT_DATA, the data file lives under XDG_DATA_HOME.
	t.Setenv("TBLIMIT_TIMEOUT", "")
	t.Setenv("TBLIMIT_DATA", "")
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "xdg"))
	e.ok("resources", "list")
	if _, err := os.Stat(filepath.Join(dir, "xdg", "tblimit", "embedded.journal")); err != nil {
		t.Errorf("default data file: %v", err)
	}
}

// The JSON of every command has exactly the documented fields.
func TestJSONFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	csv := filepath.Join(t.TempDir(), "u.csv")
	if err := os.WriteFile(csv, []byte("dave,4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yml := filepath.Join(t.TempDir(), "l.yaml")
	if err := os.WriteFile(yml, []byte("resources:\n  - {name: api, kind: requests, ledger: 1, window: 1m, default_limit: 5, users: [{key: erin}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	resource := []string{"name", "kind", "ledger", "window_seconds", "default_limit", "lazy", "currency_ledger"}
	user := []string{"resource", "user", "limit", "in_flight", "available", "next_release_seconds", "next_release_units", "reset_after_seconds"}
	decision := []string{"allowed", "reason", "resource", "amount", "limit", "remaining", "retry_after_seconds", "reset_after_seconds", "id", "time"}
	for _, c := range []struct {
		code cmdutil.ExitCode
		args []string
		keys []string
	}{
		{cmdutil.ExitOK, []string{"resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "5"}, append(resource, "created")},
		{cmdutil.ExitOK, []string{"resources", "create", "usd", "--kind", "money", "--ledger", "3", "--currency", "840", "--window", "1d", "--limit", "100"}, append(resource, "created")},
		{cmdutil.ExitOK, []string{"resources", "list"}, []string{"resources"}},
		{cmdutil.ExitOK, []string{"resources", "show", "api"}, resource},
		{cmdutil.ExitOK, []string{"users", "add", "api", "alice"}, append(user, "created")},
		{cmdutil.ExitOK, []string{"users", "add", "usd", "alice"}, append(user, "created", "funds")},
		{cmdutil.ExitOK, []string{"users", "add", "usd", "shop"}, append(user, "created", "funds")},
		{cmdutil.ExitOK, []string{"users", "set-limit", "api", "alice", "6"}, user},
		{cmdutil.ExitOK, []string{"users", "show", "api", "alice"}, user},
		{cmdutil.ExitOK, []string{"users", "show", "usd", "alice"}, append(user, "funds")},
		{cmdutil.ExitOK, []string{"users", "list", "api"}, []string{"resource", "users"}},
		{cmdutil.ExitOK, []string{"users", "import", "api", csv}, []string{"resource", "file", "users", "added", "changed", "unchanged", "seconds"}},
		{cmdutil.ExitOK, []string{"apply", "-f", yml, "--dry-run"}, []string{"dry_run", "changes", "unchanged"}},
		{cmdutil.ExitOK, []string{"acquire", "api", "alice"}, append(decision, "user")},
		{cmdutil.ExitOK, []string{"fund", "usd", "alice", "1000"}, []string{"resource", "currency_ledger", "user", "amount", "funds", "id"}},
		{cmdutil.ExitOK, []string{"pay", "usd", "alice", "shop", "10"}, append(decision, "from", "to", "funds")},
		{cmdutil.ExitDenied, []string{"pay", "usd", "alice", "shop", "100"}, append(decision, "from", "to", "funds")},
		{cmdutil.ExitOK, []string{"usage", "api", "alice"}, []string{"resource", "user", "limit", "in_flight", "available", "flights"}},
		{cmdutil.ExitOK, []string{"history", "api", "alice"}, []string{"resource", "user", "since", "until", "admissions", "more"}},
		{cmdutil.ExitOK, []string{"audit", "api"}, []string{"resource", "since", "until", "ok", "users", "unaudited"}},
	} {
		var m map[string]json.RawMessage
		r := e.code(c.code, append([]string{"-o", "json"}, c.args...)...)
		if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
			t.Fatalf("tblimit -o json %s: %v: %q", strings.Join(c.args, " "), err, r.stdout)
		}
		var got []string
		for k := range m {
			got = append(got, k)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.keys))
		if !slices.Equal(got, want) {
			t.Errorf("tblimit -o json %s: fields %v, want %v", strings.Join(c.args, " "), got, want)
		}
	}
	var u usage.JSON
	e.json(cmdutil.ExitOK, &u, "usage", "api", "alice")
	var res map[string]any
	b, _ := json.Marshal(u.Flights[0])
	_ = json.Unmarshal(b, &res)
	if len(res) != 6 {
		t.Errorf("a flight has fields %v, want id, amount, taken, returns, returns_in_seconds, ref", res)
	}
	for _, c := range []struct {
		args []string
		path []string // to the object checked
		keys []string
	}{
		{[]string{"history", "api", "alice"}, []string{"admissions", "0"}, []string{"id", "hold", "taken", "amount", "ref", "end", "ended"}},
		{[]string{"history", "usd", "alice"}, []string{"admissions", "0"}, []string{"id", "hold", "taken", "amount", "ref", "end", "ended", "payment"}},
		{[]string{"history", "usd", "alice"}, []string{"admissions", "0", "payment"}, []string{"id", "to", "to_account", "amount", "time"}},
		{[]string{"audit", "api"}, []string{"users", "0"}, []string{"user", "id", "ok", "limit", "limit_min", "limit_max", "in_flight_over", "holds", "units", "ended", "most_in_window", "window_start", "most_in_flight", "over"}},
	} {
		var v any
		if err := json.Unmarshal([]byte(e.ok(append([]string{"-o", "json"}, c.args...)...)), &v); err != nil {
			t.Fatal(err)
		}
		for _, step := range c.path {
			switch x := v.(type) {
			case map[string]any:
				v = x[step]
			case []any:
				v = x[0]
			}
		}
		m, _ := v.(map[string]any)
		got := slices.Sorted(maps.Keys(m))
		if want := slices.Sorted(slices.Values(c.keys)); !slices.Equal(got, want) {
			t.Errorf("tblimit -o json %s: %v has fields %v, want %v", strings.Join(c.args, " "), c.path, got, want)
		}
	}
}

// A torn tail is cut with a notice on stderr; damage in the middle is
// refused, naming the file and the offset, and the file is left alone.
func TestDataFileDamage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "10", "--lazy")
	e.ok("acquire", "api", "alice")
	// Every command checkpoints its requests into the store when it ends:
	// the journal's records start again after its header, where an end
	// mark (24 zero bytes) stands, what follows being space to write over.
	records := func(data []byte) {
		t.Helper()
		if len(data) < 48 || !bytes.Equal(data[24:48], make([]byte, 24)) {
			t.Fatalf("the journal after a command: %d bytes, want its records to end at its 24-byte header", len(data))
		}
	}
	good := e.dataBytes()
	records(good)

	torn := bytes.Clone(good)
	copy(torn[24:], "TBLJ\x02\x00\x00\x00partial") // the next record, cut short
	if err := os.WriteFile(e.data, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.code(cmdutil.ExitOK, "acquire", "api", "alice")
	if !strings.Contains(r.stderr, "tblimit: notice: "+e.data+": cut a torn tail") {
		t.Errorf("stderr after a torn tail = %q, want a notice", r.stderr)
	}
	var u users.UserJSON
	e.json(cmdutil.ExitOK, &u, "users", "show", "api", "alice")
	if u.InFlight != 2 {
		t.Fatalf("after recovery: %+v, want both acquires kept", u)
	}

	// Damage needs two records after the checkpoint, the first damaged,
	// the second intact.
	bad := e.dataBytes()
	records(bad)
	later := uint64(time.Now().Add(time.Hour).UnixNano())
	bad = append(bad[:24:24], journalRecord(later)...)
	bad = append(bad, journalRecord(later+1)...)
	bad[24+30] ^= 0xff // inside the first record
	if err := os.WriteFile(e.data, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.code(cmdutil.ExitError, "users", "show", "api", "alice")
	if !strings.Contains(r.stderr, e.data) || !strings.Contains(r.stderr, "offset 24") || !strings.Contains(r.stderr, "corrupt") {
		t.Errorf("stderr for a damaged data file = %q, want the file, the offset and corrupt", r.stderr)
	}
	if !bytes.Equal(bad, e.dataBytes()) {
		t.Errorf("a refused data file was changed")
	}
}

// journalRecord is a create_accounts record of one account, stamped at
// time ns, in the journal's format (see embedded.File).
func journalRecord(ns uint64) []byte {
	b := make([]byte, 24+128)
	binary.LittleEndian.PutUint32(b[0:], 0x4a4c4254)
	b[4] = 1
	binary.LittleEndian.PutUint64(b[8:], ns)
	binary.LittleEndian.PutUint32(b[16:], 128)
	b[24] = byte(ns) // ID
	b[24+112] = 1    // ledger
	b[24+116] = 1    // code
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	c := crc32.Update(0, castagnoli, b[:20])
	binary.LittleEndian.PutUint32(b[20:], crc32.Update(c, castagnoli, b[24:]))
	return b
}

// While one process has the data file, another gets a clear error.
func TestDataFileInUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "list")
	held, err := embedded.Open(e.data)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	r := e.code(cmdutil.ExitError, "resources", "list")
	if !strings.Contains(r.stderr, e.data+" is in use by another process") {
		t.Errorf("stderr = %q, want the file named as in use", r.stderr)
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if out := e.ok("completion", shell); !strings.Contains(out, "tblimit") {
			t.Errorf("completion %s: no script", shell)
		}
	}
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "10")
	out := e.code(cmdutil.ExitOK, "__complete", "acquire", "").stdout
	if !strings.HasPrefix(out, "api\t") {
		t.Errorf("completing a resource = %q, want api", out)
	}
}

func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the demo waits three windows")
	}
	t.Parallel()
	e := &cliEnv{t: t, ctx: t.Context()}
	out := e.ok("demo", "--window", "1s")
	for _, want := range []string{"request 6", "DENIED (limit exceeded)", "request 7", "carol now holds"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// tigerbeetle up starts its supervisor in the background and reports what
// went wrong there: here a binary that fails to format a data file.
func TestServerUpReportsFailure(t *testing.T) {
	t.Setenv(envMain, "1") // up re-executes this binary as tblimit
	dir := t.TempDir()
	e := &cliEnv{t: t, ctx: t.Context()}
	r := e.code(cmdutil.ExitError, "tigerbeetle", "up", "--dir", filepath.Join(dir, "server"), "--binary", failingBinary(t), "--port", "0")
	if !strings.Contains(r.stderr, "fake tigerbeetle: cannot format") {
		t.Errorf("tigerbeetle up with a failing binary: stderr %q, want the binary's output", r.stderr)
	}
	var st tigerbeetle.ServerJSON
	e.json(cmdutil.ExitError, &st, "tigerbeetle", "status", "--dir", filepath.Join(dir, "server"))
	if st.Running {
		t.Errorf("status after a failed up = %+v", st)
	}
}

// writeTestFile writes content to file name in dir and returns its path.
func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
