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
