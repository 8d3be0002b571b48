package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// The tests in this file check how each command reads its arguments and
// flags, without a ledger: the command gets a runF that captures its
// options, as gh's tests do.

func TestAcquireParsing(t *testing.T) {
	cmdtest.CheckParse(t, newCmdAcquire, []cmdtest.ParseCase[acquireOptions]{
		{Args: []string{"api", "alice"}, Want: acquireOptions{Resource: "api", User: "alice", Amount: 1}},
		{Args: []string{"2", "bob", "10_000"}, Want: acquireOptions{Resource: "2", User: "bob", Amount: 10000}},
		{Args: []string{"api", "alice", "--id", "ff", "--ref", "7"}, Want: acquireOptions{Resource: "api", User: "alice", Amount: 1, ID: cmdtest.MustID(t, "ff"), Ref: 7}},
		{Args: []string{"api"}, Err: "accepts between 2 and 3 arg(s)"},
		{Args: []string{"api", "alice", "1", "2"}, Err: "accepts between 2 and 3 arg(s)"},
		{Args: []string{"api", "alice", "0"}, Err: `AMOUNT "0": must be at least 1`},
		{Args: []string{"api", "alice", "-3"}, Err: `"-3": negative numbers are not allowed`},
		{Args: []string{"api", "alice", "1.5"}, Err: `AMOUNT "1.5"`},
		{Args: []string{"api", ""}, Err: "USER: "},
		{Args: []string{"api", "alice", "--id", "xyz"}, Err: `--id "xyz"`},
		{Args: []string{"api", "alice", "--id", "0"}, Err: `--id "0"`},
		{Args: []string{"api", "alice", "--ref", "x"}, Err: `--ref "x": want a whole number from 0 up`},
		{Args: []string{"api", "alice", "--bogus"}, Err: "unknown flag: --bogus"},
	})
}

func TestPayParsing(t *testing.T) {
	cmdtest.CheckParse(t, newCmdPay, []cmdtest.ParseCase[payOptions]{
		{Args: []string{"usd", "alice", "shop", "600"}, Want: payOptions{Resource: "usd", From: "alice", To: "shop", Amount: 600}},
		{Args: []string{"usd", "alice", "shop", "1", "--id", "abc", "--ref", "9"}, Want: payOptions{Resource: "usd", From: "alice", To: "shop", Amount: 1, ID: cmdtest.MustID(t, "abc"), Ref: 9}},
		{Args: []string{"usd", "alice", "alice", "1"}, Err: "cannot pay itself"},
		{Args: []string{"usd", "alice", "shop"}, Err: "accepts 4 arg(s)"},
		{Args: []string{"usd", "alice", "shop", "0"}, Err: `AMOUNT "0"`},
		{Args: []string{"usd", "", "shop", "1"}, Err: "FROM: "},
		{Args: []string{"usd", "alice", "", "1"}, Err: "TO: "},
	})
}

func TestFundParsing(t *testing.T) {
	cmdtest.CheckParse(t, newCmdFund, []cmdtest.ParseCase[fundOptions]{
		{Args: []string{"usd", "alice", "500", "--id", "1f"}, Want: fundOptions{Resource: "usd", User: "alice", Amount: 500, ID: cmdtest.MustID(t, "1f")}},
		{Args: []string{"usd", "alice", "0"}, Err: `AMOUNT "0"`},
		{Args: []string{"usd", "alice", "5", "--id", "zz"}, Err: `--id "zz"`},
	})
	// Without --id, a new ID: the output names it for a retry.
	got, err := cmdtest.ParseCmd(t, newCmdFund, "usd", "alice", "5")
	if err != nil || got.ID.IsZero() {
		t.Errorf("fund without --id: %+v, %v; want a new ID", got, err)
	}
}

func TestUsageParsing(t *testing.T) {
	cmdtest.CheckParse(t, newCmdUsage, []cmdtest.ParseCase[usageOptions]{
		{Args: []string{"api", "alice"}, Want: usageOptions{Resource: "api", User: "alice", Max: 100}},
		{Args: []string{"api", "alice", "--max", "0"}, Want: usageOptions{Resource: "api", User: "alice"}},
		{Args: []string{"api", "alice", "--max", "-1"}, Err: "--max -1: must not be negative"},
		{Args: []string{"api"}, Err: "accepts 2 arg(s)"},
	})
}

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

func TestResourcesParsing(t *testing.T) {
	create := func(args ...string) []string {
		return append([]string{"x", "--kind", "requests", "--ledger", "9", "--window", "1m", "--limit", "10"}, args...)
	}
	cmdtest.CheckParse(t, newCmdResourcesCreate, []cmdtest.ParseCase[resourcesCreateOptions]{
		{Args: create(), Want: resourcesCreateOptions{Resource: ledger.Resource{Name: "x", Kind: ledger.KindRequests, Ledger: 9, Window: time.Minute, DefaultLimit: 10}}},
		{Args: create("--lazy"), Want: resourcesCreateOptions{Resource: ledger.Resource{Name: "x", Kind: ledger.KindRequests, Ledger: 9, Window: time.Minute, DefaultLimit: 10, Lazy: true}}},
		{
			Args: []string{"usd", "--kind", "money", "--ledger", "3", "--currency", "840", "--window", "1d", "--limit", "1000"},
			Want: resourcesCreateOptions{Resource: ledger.Resource{Name: "usd", Kind: ledger.KindMoney, Ledger: 3, Currency: 840, Window: 24 * time.Hour, DefaultLimit: 1000}},
		},
		{Args: []string{"x", "--kind", "requests", "--ledger", "9", "--window", "1s"}, Err: "--limit is required"},
		{Args: []string{"x", "--kind", "money", "--ledger", "9", "--window", "1s", "--limit", "1"}, Err: "--currency is required"},
		{Args: create("--currency", "840"), Err: "--currency: only a money resource"},
		{Args: []string{"x", "--kind", "coins", "--ledger", "9", "--window", "1s", "--limit", "1"}, Err: `--kind "coins"`},
		{Args: []string{"x", "--kind", "requests", "--ledger", "0", "--window", "1s", "--limit", "1"}, Err: `--ledger "0"`},
		{Args: []string{"x", "--kind", "requests", "--ledger", "9", "--window", "60", "--limit", "1"}, Err: "give a unit, e.g. 60s"},
		{Args: []string{"Bad Name", "--kind", "requests", "--ledger", "9", "--window", "1s", "--limit", "1"}, Err: `name "Bad Name"`},
		{Args: []string{"x", "--kind", "money", "--ledger", "9", "--currency", "9", "--window", "1s", "--limit", "1"}, Err: "must differ from the limit ledger"},
		{Args: []string{}, Err: "accepts 1 arg(s)"},
	})
	cmdtest.CheckParse(t, newCmdResourcesList, []cmdtest.ParseCase[resourcesListOptions]{
		{Args: []string{}, Want: resourcesListOptions{}},
		{Args: []string{"api"}, Err: `unknown command "api"`},
	})
	cmdtest.CheckParse(t, newCmdResourcesShow, []cmdtest.ParseCase[resourcesShowOptions]{
		{Args: []string{"3"}, Want: resourcesShowOptions{Resource: "3"}},
		{Args: []string{"a", "b"}, Err: "accepts 1 arg(s)"},
	})
}

func TestApplyParsing(t *testing.T) {
	cmdtest.CheckParse(t, newCmdApply, []cmdtest.ParseCase[applyOptions]{
		{Args: []string{"-f", "limits.yaml"}, Want: applyOptions{File: "limits.yaml"}},
		{Args: []string{"--file", "-", "--dry-run"}, Want: applyOptions{File: "-", DryRun: true}},
		{Args: []string{}, Err: "-f/--file is required"},
		{Args: []string{"limits.yaml"}, Err: `unknown command "limits.yaml"`},
	})
}

func TestServerParsing(t *testing.T) {
	env := func(*cmdutil.Factory) func() serverEnv {
		return func() serverEnv { return serverEnv{Dir: "d", ClusterID: 7, Timeout: time.Second} }
	}
	up := func(f *cmdutil.Factory, runF func(context.Context, *upOptions) error) *cobra.Command {
		return newCmdServerUp(env(f), runF)
	}
	base := serverEnv{Dir: "d", ClusterID: 7, Timeout: time.Second}
	cmdtest.CheckParse(t, up, []cmdtest.ParseCase[upOptions]{
		{Args: []string{}, Want: upOptions{serverEnv: base, launchSpec: launchSpec{Port: 3000, Replicas: 1, Development: true}}},
		{
			Args: []string{"--replicas", "3", "--port", "0", "--binary", "/bin/tb", "--development=false"},
			Want: upOptions{serverEnv: base, launchSpec: launchSpec{Replicas: 3, Binary: "/bin/tb"}, ReplicasGiven: true},
		},
		{Args: []string{"--replicas", "0"}, Err: "--replicas 0: want 1 to 6"},
		{Args: []string{"--replicas", "3", "--port", "65534"}, Err: "--port 65534: want 0 to 65533"},
	})
	down := func(f *cmdutil.Factory, runF func(context.Context, *downOptions) error) *cobra.Command {
		return newCmdServerDown(env(f), runF)
	}
	cmdtest.CheckParse(t, down, []cmdtest.ParseCase[downOptions]{
		{Args: []string{}, Want: downOptions{serverEnv: base, Replica: -1}},
		{Args: []string{"--replica", "1", "--kill"}, Want: downOptions{serverEnv: base, Replica: 1, Kill: true}},
		{Args: []string{"--purge"}, Want: downOptions{serverEnv: base, Replica: -1, Purge: true}},
		{Args: []string{"--purge", "--kill"}, Err: "--purge stops everything"},
		{Args: []string{"--replica", "9"}, Err: "--replica 9"},
	})
	status := func(f *cmdutil.Factory, runF func(context.Context, *statusOptions) error) *cobra.Command {
		return newCmdServerStatus(env(f), runF)
	}
	cmdtest.CheckParse(t, status, []cmdtest.ParseCase[statusOptions]{
		{Args: []string{}, Want: statusOptions{serverEnv: base}},
		{Args: []string{"now"}, Err: `unknown command "now"`},
	})
}

func TestDemoParsing(t *testing.T) {
	cmdtest.CheckParse(t, newCmdDemo, []cmdtest.ParseCase[demoOptions]{
		{Args: []string{}, Want: demoOptions{Window: 2 * time.Second}},
		{Args: []string{"--window", "1m"}, Want: demoOptions{Window: time.Minute}},
		{Args: []string{"--window", "1.5s"}, Err: "not a whole number of seconds"},
	})
}

// Every command checks its arguments, and every error of the command line
// is a usage error by its type, whatever cobra or pflag made it.
func TestUsageErrorsHaveAType(t *testing.T) {
	f := cmdutil.NewFactory(strings.NewReader(""), io.Discard, io.Discard)
	root := newRoot(f)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Args == nil {
			t.Errorf("%s has no Args check", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	for _, args := range [][]string{
		{"frobnicate"},
		{"resourcs"},
		{"users", "frobnicate"},
		{"completion", "tcsh"},
		{"acquire"},
		{"acquire", "api", "alice", "--bogus"},
		{"acquire", "api", "alice", "-3"},
		{"usage", "api", "alice", "--max", "many"},
		{"--timeout"},
		{"-o", "yaml", "resources", "list"},
	} {
		var stderr strings.Builder
		f := cmdutil.NewFactory(strings.NewReader(""), io.Discard, &stderr)
		f.Global.Data = t.TempDir() + "/never.journal"
		if code := run(t.Context(), args, f); code != cmdutil.ExitUsage {
			t.Errorf("tblimit %s = exit %d (%q), want %d", strings.Join(args, " "), code, stderr.String(), cmdutil.ExitUsage)
		}
	}
}

func TestFlagErrorNegativeNumber(t *testing.T) {
	_, err := cmdtest.ParseCmd(t, newCmdAcquire, "api", "alice", "-12")
	var ue *cmdutil.UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `"-12": negative numbers are not allowed`) {
		t.Errorf("acquire api alice -12: %v, want a usage error about a negative number", err)
	}
}

// The run functions take their dependencies from the options: here an
// in-memory engine instead of a data file, and a buffer for the output.
func TestRunWithAnInMemoryLedger(t *testing.T) {
	c := ledger.New(embedded.New())
	r := ledger.Resource{Name: "api", Kind: ledger.KindRequests, Ledger: 1, Window: time.Minute, DefaultLimit: 2, Lazy: true}
	if err := c.CreateResource(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	connect := func(context.Context) (*ledger.Client, func(), error) { return c, func() {}, nil }
	var out bytes.Buffer
	printer := func() *cmdutil.Printer { return cmdutil.NewPrinter(&out, true) }
	for i, want := range []error{nil, nil, cmdutil.Denied} {
		opts := &acquireOptions{Connect: connect, Printer: printer, Resource: "1", User: "alice", Amount: 1}
		if err := acquireRun(t.Context(), opts); err != want {
			t.Fatalf("acquire %d = %v, want %v", i, err, want)
		}
	}
	out.Reset()
	if err := usersListRun(t.Context(), &usersListOptions{Connect: connect, Printer: printer, Resource: "api"}); err != nil {
		t.Fatal(err)
	}
	var list usersJSON
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list.Users) != 1 || list.Users[0].InFlight != 2 {
		t.Errorf("users list = %s, %v; want alice with 2 in flight", out.Bytes(), err)
	}
	err := usersShowRun(t.Context(), &usersShowOptions{Connect: connect, Printer: printer, Resource: "api", Key: "bob"})
	if !errors.Is(err, ledger.ErrUnknownUser) {
		t.Errorf("users show of an unknown user = %v, want ErrUnknownUser", err)
	}
}
