package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

func TestParseWhen(t *testing.T) {
	for _, c := range []struct {
		in   string
		want when
		err  string
	}{
		{"90m", when{Ago: 90 * time.Minute}, ""},
		{"2d", when{Ago: 48 * time.Hour}, ""},
		{" 1d12h ", when{Ago: 36 * time.Hour}, ""},
		{"0s", when{}, ""},
		{"1.5s", when{Ago: 1500 * time.Millisecond}, ""},
		{"2026-01-02", when{At: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}, ""},
		{"2026-01-02T15:04:05Z", when{At: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}, ""},
		{"2026-01-02T15:04:05.5+02:00", when{At: time.Date(2026, 1, 2, 13, 4, 5, 5e8, time.UTC)}, ""},
		{"1969-12-31", when{}, "outside the times a cluster records"},
		{"2300-01-01", when{}, "outside the times a cluster records"},
		{"-1h", when{}, "want a time"},
		{"60", when{}, "want a time"},
		{"yesterday", when{}, "want a time"},
		{"2026-13-01", when{}, "want a time"},
		{"50000d", when{}, "longer ago than 49710d6h28m15s"},
		{"", when{}, "want a time"},
	} {
		got, err := parseWhen(c.in)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseWhen(%q) = %+v, %v; want an error containing %q", c.in, got, err, c.err)
			}
		case err != nil || !got.At.Equal(c.want.At) || got.Ago != c.want.Ago:
			t.Errorf("parseWhen(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		w    *when
		want time.Time
	}{
		{nil, time.Time{}},
		{&when{Ago: time.Hour}, now.Add(-time.Hour)},
		{&when{At: now.Add(time.Minute)}, now.Add(time.Minute)},
		{&when{Ago: 100 * 365 * 24 * time.Hour}, minWhen},
	} {
		if got := c.w.time(now); !got.Equal(c.want) {
			t.Errorf("%+v.time(%v) = %v, want %v", c.w, now, got, c.want)
		}
	}
}

func TestHistoryParsing(t *testing.T) {
	day2 := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	checkParse(t, newCmdHistory, []parseCase[historyOptions]{
		{args: []string{"api", "alice"}, want: historyOptions{Resource: "api", User: "alice", Max: 100}},
		{args: []string{"api", "alice", "--since", "2026-01-02", "--until", "1d", "--max", "0"},
			want: historyOptions{Resource: "api", User: "alice", Since: &when{At: day2}, Until: &when{Ago: 24 * time.Hour}}},
		{args: []string{"api", "alice", "--since", "1d", "--until", "2026-01-02"}, err: "--since 1d is after --until 2026-01-02"},
		{args: []string{"api", "alice", "--since", "2026-01-02T00:00:00Z"}, want: historyOptions{Resource: "api", User: "alice", Since: &when{At: day2}, Max: 100}},
		{args: []string{"api", "alice", "--since", "soon"}, err: `--since "soon": want a time`},
		{args: []string{"api", "alice", "--until", "-5m"}, err: `--until "-5m": want a time`},
		{args: []string{"api", "alice", "--max", "-1"}, err: "--max -1: must not be negative"},
		{args: []string{"api", "alice", "--max", "many"}, err: `--max "many": want a whole number`},
		{args: []string{"api", " alice"}, err: "USER: "},
		{args: []string{"api"}, err: "accepts 2 arg(s)"},
	})
}

func TestAuditParsing(t *testing.T) {
	checkParse(t, newCmdAudit, []parseCase[auditOptions]{
		{args: []string{"api"}, want: auditOptions{Resource: "api"}},
		{args: []string{"api", "alice", "--since", "2h"}, want: auditOptions{Resource: "api", User: "alice", Since: &when{Ago: 2 * time.Hour}}},
		{args: []string{"api", "alice", "bob"}, err: "accepts between 1 and 2 arg(s)"},
		{args: []string{"api", "\talice"}, err: "USER: "},
		{args: []string{"api", "--until", "then"}, err: `--until "then"`},
		{args: []string{}, err: "accepts between 1 and 2 arg(s)"},
	})
}

// history and audit run on their dependencies: an in-memory ledger, a
// buffer, a clock.
func TestHistoryAndAuditRun(t *testing.T) {
	clock := embedded.NewManualClock(time.Now())
	engine := embedded.New(embedded.WithClock(clock))
	c := ledger.New(engine)
	r := ledger.Resource{Name: "api", Kind: ledger.KindRequests, Ledger: 1, Window: time.Minute, DefaultLimit: 2, Lazy: true}
	if err := c.CreateResource(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.Acquire(t.Context(), r, ledger.Request{User: "alice", Amount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Minute)
	connect := func(context.Context) (*ledger.Client, func(), error) { return c, func() {}, nil }
	var out, errOut bytes.Buffer
	printer := func() *printer { return newPrinter(&out, true) }
	err := historyRun(t.Context(), &historyOptions{Connect: connect, Printer: printer, Now: clock.Now, Resource: "api", User: "alice", Since: &when{Ago: time.Hour}, Max: 1})
	var h historyJSON
	if err != nil || json.Unmarshal(out.Bytes(), &h) != nil || len(h.Admissions) != 1 || !h.More || h.Admissions[0].End != "expired" ||
		h.Since != rfc3339(clock.Now().Add(-time.Hour)) || h.Until != "" {
		t.Fatalf("history = %s, %v; want the newest of two admissions, expired, since an hour before the clock", out.Bytes(), err)
	}
	out.Reset()
	if err := auditRun(t.Context(), &auditOptions{Connect: connect, Printer: printer, ErrOut: &errOut, Now: clock.Now, Resource: "api"}); err != nil {
		t.Fatalf("audit = %v", err)
	}
	var a auditJSON
	if err := json.Unmarshal(out.Bytes(), &a); err != nil || !a.OK || len(a.Users) != 1 || a.Users[0].MostInWindow != 2 || errOut.Len() != 0 {
		t.Fatalf("audit = %s, %v, stderr %q; want alice with 2 in a window, ok", out.Bytes(), err, errOut.String())
	}
	// Another program takes alice's units for one second instead of a
	// window: they come back early, and a window holds more than the limit.
	shortHold(t, engine, r, "alice", 2)
	clock.Advance(2 * time.Second)
	if _, err := c.Acquire(t.Context(), r, ledger.Request{User: "alice", Amount: 2}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := auditRun(t.Context(), &auditOptions{Connect: connect, Printer: printer, ErrOut: &errOut, Now: clock.Now, Resource: "api", User: "alice"}); err != overLimit {
		t.Fatalf("audit of a user over its limit = %v, want exit %d", err, ExitOverLimit)
	}
	if err := json.Unmarshal(out.Bytes(), &a); err != nil || a.OK || a.Users[0].OK || a.Users[0].MostInWindow != 4 || len(a.Users[0].Over) == 0 {
		t.Fatalf("audit = %s, %v; want alice over, with 4 in a window", out.Bytes(), err)
	}
}

// shortHold takes n units of user on r with a pending transfer of one
// second, as a program that does not keep the window would.
func shortHold(t *testing.T, engine tb.Client, r ledger.Resource, user string, n uint64) {
	t.Helper()
	res, err := engine.CreateTransfers([]tb.Transfer{{
		ID:              tb.ID(),
		DebitAccountID:  tb.BytesToUint128(ledger.UserID(r.Ledger, user)),
		CreditAccountID: tb.BytesToUint128(ledger.OperatorID(r.Ledger)),
		Amount:          tb.ToUint128(n),
		Timeout:         1,
		Ledger:          r.Ledger,
		Code:            10,
		Flags:           tb.TransferFlags{Pending: true}.ToUint16(),
	}})
	if err != nil || res[0].Status != tb.TransferCreated {
		t.Fatalf("a short hold = %v, %v", res, err)
	}
}

// tblimit history lists admissions with how each ended, the newest first,
// on the data file; for money with the payment beside each hold.
func TestHistoryCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "5", "--lazy")
	var first decisionJSON
	e.json(ExitOK, &first, "acquire", "api", "alice", "2", "--ref", "41")
	e.clock.Advance(time.Minute + time.Millisecond)
	var d decisionJSON
	e.json(ExitOK, &d, "acquire", "api", "alice", "--ref", "42")
	var h historyJSON
	e.json(ExitOK, &h, "history", "api", "alice")
	if len(h.Admissions) != 2 || h.More || h.Resource != "api" || h.User != "alice" {
		t.Fatalf("history = %+v, want two admissions", h)
	}
	a, b := h.Admissions[0], h.Admissions[1]
	if a.ID != d.ID || a.Hold != d.ID || a.Taken != d.Time || a.Amount != 1 || a.Ref != 42 || a.End != "in_flight" ||
		b.ID != first.ID || b.Amount != 2 || b.Ref != 41 || b.End != "expired" {
		t.Fatalf("history = %+v, want %s in flight, then %s expired", h.Admissions, d.ID, first.ID)
	}
	e.json(ExitOK, &h, "history", "api", "alice", "--max", "1")
	if len(h.Admissions) != 1 || !h.More || h.Admissions[0].ID != d.ID {
		t.Fatalf("history --max 1 = %+v, want the newest and more", h)
	}
	e.json(ExitOK, &h, "history", "api", "alice", "--since", "30s")
	if len(h.Admissions) != 1 || h.Admissions[0].ID != d.ID {
		t.Fatalf("history --since 30s = %+v, want the newest only", h)
	}
	e.json(ExitOK, &h, "history", "api", "alice", "--until", first.Time)
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
	var paid decisionJSON
	e.json(ExitOK, &paid, "pay", "usd", "alice", "shop", "300", "--ref", "7")
	e.json(ExitDenied, &d, "pay", "usd", "alice", "shop", "300")
	e.json(ExitOK, &h, "history", "usd", "alice")
	if len(h.Admissions) != 1 || h.Admissions[0].ID != paid.ID || h.Admissions[0].Payment == nil {
		t.Fatalf("history of payments = %+v, want the one payment", h)
	}
	if p := h.Admissions[0].Payment; p.To != "shop" || p.Amount != 300 || p.ToAccount != ledger.CurrencyUserID(840, "shop").String() || p.ID == paid.ID {
		t.Fatalf("payment = %+v, want 300 to shop", p)
	}
	for _, c := range []struct {
		code ExitCode
		args []string
		want string
	}{
		{ExitError, []string{"history", "api", "carol"}, `unknown user: "carol"`},
		{ExitError, []string{"history", "nope", "alice"}, `unknown resource "nope"`},
		{ExitUsage, []string{"history", "api", "alice", "--since", "tomorrow"}, `--since "tomorrow"`},
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
	var a auditJSON
	r := e.code(ExitOK, "-o", "json", "audit", "api")
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || !a.OK || len(a.Users) != 3 || len(a.Unaudited) != 0 ||
		a.Users[2].User != long || a.Users[2].ID != ledger.UserID(1, long).String() || a.Users[0].MostInWindow != 3 {
		t.Fatalf("audit = %s, %v; want alice, bob and the long key (named, and its account) within their limits", r.stdout, err)
	}
	bobFirst := a.Users[1].WindowStart
	if r.stderr != "" {
		t.Errorf("audit's notice = %q, want none", r.stderr)
	}
	e.json(ExitOK, &a, "audit", "api", long)
	if !a.OK || len(a.Users) != 1 || a.Users[0].User != long {
		t.Fatalf("audit of the long key = %+v", a)
	}
	// Another program holds bob's units for a second instead of a window.
	e.clock.Advance(time.Minute + time.Millisecond)
	held, err := embedded.Open(e.data, embedded.WithClock(e.clock))
	if err != nil {
		t.Fatal(err)
	}
	shortHold(t, held, ledger.Resource{Ledger: 1}, "bob", 3)
	held.Close()
	e.clock.Advance(2 * time.Second)
	e.ok("acquire", "api", "bob", "3")
	r = e.code(ExitOverLimit, "audit", "api")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "bob\t3\t6\t") || !strings.HasSuffix(lines[1], "\tOVER in 1 window") {
		t.Fatalf("audit with bob over = %q, want bob's line saying so", r.stdout)
	}
	e.json(ExitOverLimit, &a, "audit", "api", "bob")
	if a.OK || a.Users[0].MostInWindow != 6 || len(a.Users[0].Over) != 1 {
		t.Fatalf("audit of bob = %+v", a)
	}
	e.json(ExitOK, &a, "audit", "api", "alice")
	e.json(ExitOK, &a, "audit", "api", "bob", "--until", bobFirst) // before the short hold
	if a.Users[0].Holds != 1 {
		t.Fatalf("audit of bob --until %s = %+v, want his first hold only", bobFirst, a)
	}
	if r := e.code(ExitError, "audit", "api", "carol"); !strings.Contains(r.stderr, `unknown user: "carol"`) {
		t.Errorf("audit of an unknown user: %q", r.stderr)
	}
}
