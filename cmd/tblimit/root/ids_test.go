package root

import (
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/history"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/cmd/tblimit/users"
)

// --id follows the idempotency contract of ledger.Request.ID: the same ID
// gets the same admission and counts once; a denial under an ID is not
// final, and the request is admitted later under the same ID once units
// (or funds) are there. Each test checks what was recorded with history.
// (A repeated answer's time is not compared: the ledger answers it with the
// time of the ID's marker, one nanosecond before the admission's hold.)

func TestAcquireIDOnALazyNewcomer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "web", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "100", "--lazy")
	const id = "0123456789abcdef0123456789abcdef"
	var first, again cmdutil.DecisionJSON
	e.json(cmdutil.ExitOK, &first, "acquire", "web", "newcomer", "--id", id)
	e.json(cmdutil.ExitOK, &again, "acquire", "web", "newcomer", "--id", id)
	if !first.Allowed || first.ID != id || !again.Allowed || again.ID != id {
		t.Fatalf("acquire --id %s twice = %+v then %+v; want one admission, answered twice", id, first, again)
	}
	var u users.UserJSON
	e.json(cmdutil.ExitOK, &u, "users", "show", "web", "newcomer")
	var h history.JSON
	e.json(cmdutil.ExitOK, &h, "history", "web", "newcomer")
	if u.InFlight != 1 || u.Limit != 100 || len(h.Admissions) != 1 || h.Admissions[0].ID != id {
		t.Fatalf("after acquire --id twice: %+v, history %+v; want 1 in flight, one admission under %s", u, h.Admissions, id)
	}
}

func TestAcquireIDDeniedThenAdmitted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "1")
	e.ok("users", "add", "api", "alice")
	var d cmdutil.DecisionJSON
	e.json(cmdutil.ExitOK, &d, "acquire", "api", "alice")
	const id = "00000000000000000000000000000abc"
	for range 2 {
		e.json(cmdutil.ExitDenied, &d, "acquire", "api", "alice", "--id", id)
		if d.Allowed || d.Reason != "limit_exceeded" || d.ID != id {
			t.Fatalf("acquire --id %s with nothing left = %+v, want denied", id, d)
		}
	}
	e.clock.Advance(time.Minute + time.Millisecond)
	var admitted cmdutil.DecisionJSON
	e.json(cmdutil.ExitOK, &admitted, "acquire", "api", "alice", "--id", id)
	e.json(cmdutil.ExitOK, &d, "acquire", "api", "alice", "--id", id)
	if !admitted.Allowed || admitted.ID != id || d.ID != id {
		t.Fatalf("acquire --id %s once the unit returned = %+v, then %+v; want one admission, answered twice", id, admitted, d)
	}
	var u users.UserJSON
	e.json(cmdutil.ExitOK, &u, "users", "show", "api", "alice")
	var h history.JSON
	e.json(cmdutil.ExitOK, &h, "history", "api", "alice")
	if u.InFlight != 1 || len(h.Admissions) != 2 || h.Admissions[0].ID != id || h.Admissions[1].End != "expired" {
		t.Fatalf("after the retries: %+v, history %+v; want 1 in flight and one admission under %s", u, h.Admissions, id)
	}
	e.json(cmdutil.ExitDenied, &d, "acquire", "api", "alice") // counted: nothing left
}

func TestPayIDDeniedThenPaid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("resources", "create", "usd", "--kind", "money", "--ledger", "3", "--currency", "840", "--window", "1d", "--limit", "1000")
	e.ok("users", "add", "usd", "alice")
	e.ok("users", "add", "usd", "shop")
	e.ok("fund", "usd", "alice", "100")
	funds := func(user string) uint64 {
		t.Helper()
		var u users.UserJSON
		e.json(cmdutil.ExitOK, &u, "users", "show", "usd", user)
		return *u.Funds
	}
	// Short of funds, then funded: the same --id pays, once.
	const order = "00000000000000000000000000000001"
	var d cmdutil.DecisionJSON
	e.json(cmdutil.ExitDenied, &d, "pay", "usd", "alice", "shop", "300", "--id", order)
	if d.Reason != "insufficient_funds" || d.ID != order {
		t.Fatalf("pay --id %s without the funds = %+v", order, d)
	}
	e.ok("fund", "usd", "alice", "900")
	var paid cmdutil.DecisionJSON
	e.json(cmdutil.ExitOK, &paid, "pay", "usd", "alice", "shop", "300", "--id", order)
	e.json(cmdutil.ExitOK, &d, "pay", "usd", "alice", "shop", "300", "--id", order)
	if paid.ID != order || d.ID != order || funds("alice") != 700 || funds("shop") != 300 {
		t.Fatalf("pay --id %s after fund, twice = %+v then %+v; alice holds %d, shop %d; want 300 paid once",
			order, paid, d, funds("alice"), funds("shop"))
	}
	// Over the limit, then a day later: the same --id pays, once.
	e.ok("fund", "usd", "alice", "300")
	const big = "00000000000000000000000000000002"
	e.json(cmdutil.ExitDenied, &d, "pay", "usd", "alice", "shop", "800", "--id", big)
	if d.Reason != "limit_exceeded" || d.ID != big || funds("alice") != 1000 {
		t.Fatalf("pay --id %s over the limit = %+v", big, d)
	}
	e.clock.Advance(24*time.Hour + time.Millisecond)
	e.json(cmdutil.ExitOK, &paid, "pay", "usd", "alice", "shop", "800", "--id", big)
	e.json(cmdutil.ExitOK, &d, "pay", "usd", "alice", "shop", "800", "--id", big)
	if paid.ID != big || d.ID != big || funds("alice") != 200 || funds("shop") != 1100 {
		t.Fatalf("pay --id %s a day later, twice = %+v then %+v; alice holds %d, shop %d; want 800 paid once",
			big, paid, d, funds("alice"), funds("shop"))
	}
	if r := e.code(cmdutil.ExitError, "pay", "usd", "alice", "shop", "700", "--id", big); !strings.Contains(r.stderr, "--id was already used for a different request") {
		t.Fatalf("pay --id %s with another amount: %q", big, r.stderr)
	}
	var h history.JSON
	e.json(cmdutil.ExitOK, &h, "history", "usd", "alice")
	if len(h.Admissions) != 2 || h.Admissions[0].ID != big || h.Admissions[0].Payment.Amount != 800 ||
		h.Admissions[1].ID != order || h.Admissions[1].Payment.Amount != 300 {
		t.Fatalf("history = %+v, want one payment under each ID", h.Admissions)
	}
}
