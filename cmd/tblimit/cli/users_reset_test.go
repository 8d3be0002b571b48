package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

func TestUsersResetParsing(t *testing.T) {
	cmdtest.CheckParse(t, newCmdUsersReset, []cmdtest.ParseCase[usersResetOptions]{
		{Args: []string{"api", "alice"}, Want: usersResetOptions{Resource: "api", Key: "alice"}},
		{Args: []string{"7", "é"}, Want: usersResetOptions{Resource: "7", Key: "é"}},
		{Args: []string{"api"}, Err: "accepts 2 arg(s)"},
		{Args: []string{"api", "alice", "bob"}, Err: "accepts 2 arg(s)"},
		{Args: []string{"api", ""}, Err: "KEY: "},
		{Args: []string{"api", " alice"}, Err: "KEY: "},
		{Args: []string{"api", "alice", "--all"}, Err: "unknown flag: --all"},
	})
}

// usersResetRun voids the user's holds and reports its state, with its
// dependencies given in the options.
func TestUsersResetRun(t *testing.T) {
	c := ledger.New(embedded.New())
	r := ledger.Resource{Name: "api", Kind: ledger.KindRequests, Ledger: 1, Window: time.Minute, DefaultLimit: 3, Lazy: true}
	if err := c.CreateResource(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if d, err := c.Acquire(t.Context(), r, ledger.Request{User: "alice", Amount: 1}); err != nil || !d.Allowed {
			t.Fatalf("Acquire = %+v, %v", d, err)
		}
	}
	connect := func(context.Context) (*ledger.Client, func(), error) { return c, func() {}, nil }
	var out bytes.Buffer
	printer := func() *cmdutil.Printer { return cmdutil.NewPrinter(&out, true) }
	for i, want := range []int{3, 0} { // the second reset finds nothing left
		out.Reset()
		if err := usersResetRun(t.Context(), &usersResetOptions{Connect: connect, Printer: printer, Resource: "api", Key: "alice"}); err != nil {
			t.Fatal(err)
		}
		var got userResetJSON
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Ended != want || got.Available != 3 || got.InFlight != 0 || got.User != "alice" {
			t.Fatalf("reset %d = %s, %v; want %d ended, 3 available", i+1, out.Bytes(), err, want)
		}
	}
	err := usersResetRun(t.Context(), &usersResetOptions{Connect: connect, Printer: printer, Resource: "api", Key: "bob"})
	if !errors.Is(err, ledger.ErrUnknownUser) {
		t.Fatalf("reset of an unknown user = %v, want ErrUnknownUser", err)
	}
}

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
