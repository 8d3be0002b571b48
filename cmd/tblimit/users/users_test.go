package users

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

func TestUsersParsing(t *testing.T) {
	cmdtest.CheckParse(t, newCmdUsersAdd, []cmdtest.ParseCase[usersAddOptions]{
		{Args: []string{"api", "alice"}, Want: usersAddOptions{Resource: "api", Key: "alice"}},
		{Args: []string{"api", "alice", "--limit", "1_000"}, Want: usersAddOptions{Resource: "api", Key: "alice", Limit: cmdtest.Ptr(uint64(1000))}},
		{Args: []string{"api", "alice", "--limit", "0"}, Want: usersAddOptions{Resource: "api", Key: "alice", Limit: cmdtest.Ptr(uint64(0))}},
		{Args: []string{"api", "alice", "--limit", "lots"}, Err: `--limit "lots"`},
		{Args: []string{"api", ""}, Err: "KEY: "},
	})
	cmdtest.CheckParse(t, newCmdUsersSetLimit, []cmdtest.ParseCase[usersSetLimitOptions]{
		{Args: []string{"api", "bob", "3"}, Want: usersSetLimitOptions{Resource: "api", Key: "bob", Limit: 3}},
		{Args: []string{"api", "bob", "-1"}, Err: "negative"},
		{Args: []string{"api", "bob", "lots"}, Err: `LIMIT "lots"`},
		{Args: []string{"api", "bob"}, Err: "accepts 3 arg(s)"},
	})
	cmdtest.CheckParse(t, newCmdUsersShow, []cmdtest.ParseCase[usersShowOptions]{
		{Args: []string{"api", "bob"}, Want: usersShowOptions{Resource: "api", Key: "bob"}},
		{Args: []string{"api"}, Err: "accepts 2 arg(s)"},
	})
	cmdtest.CheckParse(t, newCmdUsersList, []cmdtest.ParseCase[usersListOptions]{
		{Args: []string{"api"}, Want: usersListOptions{Resource: "api"}},
		{Args: []string{}, Err: "accepts 1 arg(s)"},
	})
	cmdtest.CheckParse(t, newCmdUsersImport, []cmdtest.ParseCase[usersImportOptions]{
		{Args: []string{"api", "-"}, Want: usersImportOptions{Resource: "api", File: "-"}},
		{Args: []string{"api"}, Err: "accepts 2 arg(s)"},
	})
}

// The run functions take their dependencies from the options: here an
// in-memory engine instead of a data file, and a buffer for the output.
func TestUsersRunWithAnInMemoryLedger(t *testing.T) {
	c := ledger.New(embedded.New())
	r := ledger.Resource{Name: "api", Kind: ledger.KindRequests, Ledger: 1, Window: time.Minute, DefaultLimit: 2, Lazy: true}
	if err := c.CreateResource(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	connect := func(context.Context) (*ledger.Client, func(), error) { return c, func() {}, nil }
	var out bytes.Buffer
	printer := func() *cmdutil.Printer { return cmdutil.NewPrinter(&out, true) }
	for range 3 { // the third is denied: alice holds 2
		if _, err := c.Acquire(t.Context(), r, ledger.Request{User: "alice", Amount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := usersListRun(t.Context(), &usersListOptions{Connect: connect, Printer: printer, Resource: "api"}); err != nil {
		t.Fatal(err)
	}
	var list ListJSON
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list.Users) != 1 || list.Users[0].InFlight != 2 {
		t.Errorf("users list = %s, %v; want alice with 2 in flight", out.Bytes(), err)
	}
	err := usersShowRun(t.Context(), &usersShowOptions{Connect: connect, Printer: printer, Resource: "api", Key: "bob"})
	if !errors.Is(err, ledger.ErrUnknownUser) {
		t.Errorf("users show of an unknown user = %v, want ErrUnknownUser", err)
	}
}
