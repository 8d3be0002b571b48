package root

import (
	"bytes"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/cmd/tblimit/reserve"
	"github.com/tblimit/tblimit/cmd/tblimit/users"
)

// reserve, commit and cancel from the command line: a commit keeps what it
// commits for the window and gives the rest back; on money, reserve
// authorizes, commit captures, cancel releases.
func TestReserveCommitCancel(t *testing.T) {
	e := newEnv(t)
	e.ok("resources", "create", "llm", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "5000")
	e.ok("users", "add", "llm", "alice")
	available := func(res, user string) uint64 {
		t.Helper()
		var u users.UserJSON
		e.json(cmdutil.ExitOK, &u, "users", "show", res, user)
		return u.Available
	}
	var rv reserve.ReservationJSON
	e.json(cmdutil.ExitOK, &rv, "reserve", "llm", "alice", "2000")
	if !rv.Allowed || rv.Reservation == "" || rv.Remaining != 3000 {
		t.Fatalf("reserve 2000 = %+v, want reserved with 3000 left", rv)
	}
	var end reserve.EndJSON
	e.json(cmdutil.ExitOK, &end, "commit", rv.Reservation, "700")
	if end.Ended != "committed" || end.Amount != 700 || end.Resource != "llm" {
		t.Fatalf("commit 700 = %+v", end)
	}
	e.ok("commit", rv.Reservation, "700") // a retry
	if got := available("llm", "alice"); got != 4300 {
		t.Fatalf("after committing 700 of 2000: %d available, want 4300", got)
	}
	if r := e.code(cmdutil.ExitError, "cancel", rv.Reservation); !bytes.Contains([]byte(r.stderr), []byte("committed")) {
		t.Fatalf("cancel after commit: stderr %q, want it to say the reservation was committed", r.stderr)
	}
	e.code(cmdutil.ExitError, "commit", rv.Reservation, "800")
	e.clock.Advance(time.Minute + time.Second)
	if got := available("llm", "alice"); got != 5000 {
		t.Fatalf("a window later: %d available, want all 5000 back", got)
	}
	e.code(cmdutil.ExitDenied, "reserve", "llm", "alice", "5001")
	e.code(cmdutil.ExitUsage, "reserve", "llm", "alice", "5", "--payee", "shop")
	e.code(cmdutil.ExitError, "commit", "0123456789abcdef0123456789abcdef")

	e.ok("resources", "create", "usd", "--kind", "money", "--ledger", "2", "--currency", "840", "--window", "1d", "--limit", "1000")
	e.ok("users", "add", "usd", "alice")
	e.ok("users", "add", "usd", "shop")
	e.ok("fund", "usd", "alice", "900")
	e.code(cmdutil.ExitUsage, "reserve", "usd", "alice", "5")
	held := func(user string) uint64 {
		t.Helper()
		var u users.UserJSON
		e.json(cmdutil.ExitOK, &u, "users", "show", "usd", user)
		return *u.Funds
	}
	e.json(cmdutil.ExitOK, &rv, "reserve", "usd", "alice", "600", "--payee", "shop", "--timeout", "1h")
	if held("alice") != 300 || held("shop") != 0 {
		t.Fatalf("authorized 600: alice holds %d, shop %d; want 300 and 0", held("alice"), held("shop"))
	}
	e.ok("commit", rv.Reservation, "450")
	e.ok("commit", rv.Reservation, "450")
	if held("alice") != 450 || held("shop") != 450 || available("usd", "alice") != 550 {
		t.Fatalf("captured 450: alice holds %d, shop %d, limit %d left; want 450, 450, 550", held("alice"), held("shop"), available("usd", "alice"))
	}
	e.json(cmdutil.ExitOK, &rv, "reserve", "usd", "alice", "400", "--payee", "shop")
	e.ok("cancel", rv.Reservation)
	e.ok("cancel", rv.Reservation)
	e.code(cmdutil.ExitError, "commit", rv.Reservation)
	if held("alice") != 450 || held("shop") != 450 || available("usd", "alice") != 550 {
		t.Fatalf("released 400: alice holds %d, shop %d, limit %d left; want 450, 450, 550", held("alice"), held("shop"), available("usd", "alice"))
	}
	var d reserve.ReservationJSON
	e.json(cmdutil.ExitDenied, &d, "reserve", "usd", "alice", "500", "--payee", "shop")
	if d.Reason != "insufficient_funds" || d.Reservation != "" {
		t.Fatalf("authorize 500 of 450 held = %+v, want denied for funds", d)
	}
}
