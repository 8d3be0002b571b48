package root

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/audit"
	"github.com/tblimit/tblimit/cmd/tblimit/history"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// tblimit history lists admissions with how each ended, the newest first,
// on the data file; for money with the payment beside each hold.
func TestHistoryCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "5", "--lazy")
	var first cmdutil.DecisionJSON
	e.json(cmdutil.ExitOK, &first, "acquire", "api", "alice", "2", "--ref", "41")
	e.clock.Advance(time.Minute + time.Millisecond)
	var d cmdutil.DecisionJSON
	e.json(cmdutil.ExitOK, &d, "acquire", "api", "alice", "--ref", "42")
	var h history.JSON
	e.json(cmdutil.ExitOK, &h, "history", "api", "alice")
	if len(h.Admissions) != 2 || h.More || h.Resource != "api" || h.User != "alice" {
		t.Fatalf("history = %+v, want two admissions", h)
	}
	a, b := h.Admissions[0], h.Admissions[1]
	if a.ID != d.ID || a.Hold != d.ID || a.Taken != d.Time || a.Amount != 1 || a.Ref != 42 || a.End != "in_flight" ||
		b.ID != first.ID || b.Amount != 2 || b.Ref != 41 || b.End != "expired" {
		t.Fatalf("history = %+v, want %s in flight, then %s expired", h.Admissions, d.ID, first.ID)
	}
	e.json(cmdutil.ExitOK, &h, "history", "api", "alice", "--max", "1")
	if len(h.Admissions) != 1 || !h.More || h.Admissions[0].ID != d.ID {
		t.Fatalf("history --max 1 = %+v, want the newest and more", h)
	}
	e.json(cmdutil.ExitOK, &h, "history", "api", "alice", "--since", "30s")
	if len(h.Admissions) != 1 || h.Admissions[0].ID != d.ID {
		t.Fatalf("history --since 30s = %+v, want the newest only", h)
	}
	e.json(cmdutil.ExitOK, &h, "history", "api", "alice", "--until", first.Time)
	if len(h.Admissions) != 1 || h.Admissions[0].ID != first.ID || h.Until != first.Time {
		t.Fatalf("history --until %s = %+v, want the first only", first.Time, h)
	}
	if out := e.ok("history", "api", "alice"); strings.Count(out, "\n") != 2 || !strings.HasPrefix(out, d.Time+"\t"+d.ID+"\t1\t42\tin flight\t") {
		t.Fatalf("history as text = %q, want one tab-separated line per admission", out)
	}
	e.ok("users", "add", "api", "bob")
	if out := e.ok("history", "api", "bob"); out != "" {
		t.Fatalf("history of a user without admissions, not on a terminal = %q, want nothing (rows only)", out)
	}

	e.ok("resources", "create", "usd", "--kind", "money", "--ledger", "3", "--currency", "840", "--window", "1d", "--limit", "1000")
	e.ok("users", "add", "usd", "alice")
	e.ok("users", "add", "usd", "shop")
	e.ok("fund", "usd", "alice", "500")
	var paid cmdutil.DecisionJSON
	e.json(cmdutil.ExitOK, &paid, "pay", "usd", "alice", "shop", "300", "--ref", "7")
	e.json(cmdutil.ExitDenied, &d, "pay", "usd", "alice", "shop", "300")
	e.json(cmdutil.ExitOK, &h, "history", "usd", "alice")
	if len(h.Admissions) != 1 || h.Admissions[0].ID != paid.ID || h.Admissions[0].Payment == nil {
		t.Fatalf("history of payments = %+v, want the one payment", h)
	}
	if p := h.Admissions[0].Payment; p.To != "shop" || p.Amount != 300 || p.ToAccount != ledger.CurrencyUserID(840, "shop").String() || p.ID == paid.ID {
		t.Fatalf("payment = %+v, want 300 to shop", p)
	}
	for _, c := range []struct {
		code cmdutil.ExitCode
		args []string
		want string
	}{
		{cmdutil.ExitError, []string{"history", "api", "carol"}, `unknown user: "carol"`},
		{cmdutil.ExitError, []string{"history", "nope", "alice"}, `unknown resource "nope"`},
		{cmdutil.ExitUsage, []string{"history", "api", "alice", "--since", "tomorrow"}, `--since "tomorrow"`},
	} {
		if r := e.code(c.code, c.args...); !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("tblimit %s: stdout %q, stderr %q; want an error containing %q", strings.Join(c.args, " "), r.stdout, r.stderr, c.want)
		}
	}
}

// tblimit audit checks every user (or one) against its limit from what the
// data file recorded, and exits 4 when one was over.
func TestAuditCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "3", "--lazy")
	long := strings.Repeat("k", 20) // kept in name accounts, beside its account
	for _, u := range []string{"alice", "bob", long} {
		e.ok("acquire", "api", u, "3")
	}
	var a audit.JSON
	r := e.code(cmdutil.ExitOK, "-o", "json", "audit", "api")
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || !a.OK || len(a.Users) != 3 || len(a.Unaudited) != 0 ||
		a.Users[2].User != long || a.Users[2].ID != ledger.UserID(1, long).String() || a.Users[0].MostInWindow != 3 {
		t.Fatalf("audit = %s, %v; want alice, bob and the long key (named, and its account) within their limits", r.stdout, err)
	}
	bobFirst := a.Users[1].WindowStart
	if r.stderr != "" {
		t.Errorf("audit's notice = %q, want none", r.stderr)
	}
	e.json(cmdutil.ExitOK, &a, "audit", "api", long)
	if !a.OK || len(a.Users) != 1 || a.Users[0].User != long {
		t.Fatalf("audit of the long key = %+v", a)
	}
	// Another program holds bob's units for a second instead of a window.
	e.clock.Advance(time.Minute + time.Millisecond)
	held, err := embedded.Open(e.data, embedded.WithClock(e.clock))
	if err != nil {
		t.Fatal(err)
	}
	cmdtest.ShortHold(t, held, ledger.Resource{Ledger: 1}, "bob", 3)
	held.Close()
	e.clock.Advance(2 * time.Second)
	e.ok("acquire", "api", "bob", "3")
	r = e.code(cmdutil.ExitOverLimit, "audit", "api")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "bob\t3\t6\t") || !strings.HasSuffix(lines[1], "\tOVER in 1 window") {
		t.Fatalf("audit with bob over = %q, want bob's line saying so", r.stdout)
	}
	e.json(cmdutil.ExitOverLimit, &a, "audit", "api", "bob")
	if a.OK || a.Users[0].MostInWindow != 6 || len(a.Users[0].Over) != 1 {
		t.Fatalf("audit of bob = %+v", a)
	}
	e.json(cmdutil.ExitOK, &a, "audit", "api", "alice")
	e.json(cmdutil.ExitOK, &a, "audit", "api", "bob", "--until", bobFirst) // before the short hold
	if a.Users[0].Holds != 1 {
		t.Fatalf("audit of bob --until %s = %+v, want his first hold only", bobFirst, a)
	}
	if r := e.code(cmdutil.ExitError, "audit", "api", "carol"); !strings.Contains(r.stderr, `unknown user: "carol"`) {
		t.Errorf("audit of an unknown user: %q", r.stderr)
	}
}
