package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// The tests in this file check how each command reads its arguments and
// flags, without a ledger: the command gets a runF that captures its
// options, as gh's tests do.

// parseCmd runs the command newCmd builds on args, with a runF that captures
// its options, under the root's conventions for usage errors. It returns the
// options runF got (nil if it was not called) and the error.
func parseCmd[T any](t *testing.T, newCmd func(*factory, func(context.Context, *T) error) *cobra.Command, args ...string) (*T, error) {
	t.Helper()
	var got *T
	f := newFactory(strings.NewReader(""), io.Discard, io.Discard)
	cmd := newCmd(f, func(_ context.Context, o *T) error { got = o; return nil })
	usageConventions(cmd)
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	return got, cmd.ExecuteContext(t.Context())
}

// inputs returns o without its dependencies (functions and writers), for
// comparing what a command parsed.
func inputs[T any](o *T) T {
	v := *o
	clearDeps(reflect.ValueOf(&v).Elem())
	return v
}

func clearDeps(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Func, reflect.Interface:
			f.SetZero()
		case reflect.Struct:
			clearDeps(f)
		}
	}
}

// parseCase is one command line and what it must give: the options, or a
// usage error containing err.
type parseCase[T any] struct {
	args []string
	want T
	err  string
}

func checkParse[T any](t *testing.T, newCmd func(*factory, func(context.Context, *T) error) *cobra.Command, cases []parseCase[T]) {
	t.Helper()
	for _, c := range cases {
		got, err := parseCmd(t, newCmd, c.args...)
		switch {
		case c.err != "":
			if !isUsage(err) || !strings.Contains(err.Error(), c.err) || got != nil {
				t.Errorf("%q: options %+v, error %v; want a usage error containing %q", c.args, got, err, c.err)
			}
		case err != nil || got == nil:
			t.Errorf("%q: error %v, want options %+v", c.args, err, c.want)
		case !reflect.DeepEqual(inputs(got), c.want):
			t.Errorf("%q: options %+v, want %+v", c.args, inputs(got), c.want)
		}
	}
}

func mustID(t *testing.T, s string) ledger.ID {
	t.Helper()
	id, err := ledger.ParseID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func ptr[T any](v T) *T { return &v }

func TestAcquireParsing(t *testing.T) {
	checkParse(t, newCmdAcquire, []parseCase[acquireOptions]{
		{args: []string{"api", "alice"}, want: acquireOptions{Resource: "api", User: "alice", Amount: 1}},
		{args: []string{"2", "bob", "10_000"}, want: acquireOptions{Resource: "2", User: "bob", Amount: 10000}},
		{args: []string{"api", "alice", "--id", "ff", "--ref", "7"}, want: acquireOptions{Resource: "api", User: "alice", Amount: 1, ID: mustID(t, "ff"), Ref: 7}},
		{args: []string{"api"}, err: "accepts between 2 and 3 arg(s)"},
		{args: []string{"api", "alice", "1", "2"}, err: "accepts between 2 and 3 arg(s)"},
		{args: []string{"api", "alice", "0"}, err: `AMOUNT "0": must be at least 1`},
		{args: []string{"api", "alice", "-3"}, err: `"-3": negative numbers are not allowed`},
		{args: []string{"api", "alice", "1.5"}, err: `AMOUNT "1.5"`},
		{args: []string{"api", ""}, err: "USER: "},
		{args: []string{"api", "alice", "--id", "xyz"}, err: `--id "xyz"`},
		{args: []string{"api", "alice", "--id", "0"}, err: `--id "0"`},
		{args: []string{"api", "alice", "--ref", "x"}, err: `--ref "x": want a whole number from 0 up`},
		{args: []string{"api", "alice", "--bogus"}, err: "unknown flag: --bogus"},
	})
}

func TestPayParsing(t *testing.T) {
	checkParse(t, newCmdPay, []parseCase[payOptions]{
		{args: []string{"usd", "alice", "shop", "600"}, want: payOptions{Resource: "usd", From: "alice", To: "shop", Amount: 600}},
		{args: []string{"usd", "alice", "shop", "1", "--id", "abc", "--ref", "9"}, want: payOptions{Resource: "usd", From: "alice", To: "shop", Amount: 1, ID: mustID(t, "abc"), Ref: 9}},
		{args: []string{"usd", "alice", "alice", "1"}, err: "cannot pay itself"},
		{args: []string{"usd", "alice", "shop"}, err: "accepts 4 arg(s)"},
		{args: []string{"usd", "alice", "shop", "0"}, err: `AMOUNT "0"`},
		{args: []string{"usd", "", "shop", "1"}, err: "FROM: "},
		{args: []string{"usd", "alice", "", "1"}, err: "TO: "},
	})
}

func TestFundParsing(t *testing.T) {
	checkParse(t, newCmdFund, []parseCase[fundOptions]{
		{args: []string{"usd", "alice", "500", "--id", "1f"}, want: fundOptions{Resource: "usd", User: "alice", Amount: 500, ID: mustID(t, "1f")}},
		{args: []string{"usd", "alice", "0"}, err: `AMOUNT "0"`},
		{args: []string{"usd", "alice", "5", "--id", "zz"}, err: `--id "zz"`},
	})
	// Without --id, a new ID: the output names it for a retry.
	got, err := parseCmd(t, newCmdFund, "usd", "alice", "5")
	if err != nil || got.ID.IsZero() {
		t.Errorf("fund without --id: %+v, %v; want a new ID", got, err)
	}
}

func TestUsageParsing(t *testing.T) {
	checkParse(t, newCmdUsage, []parseCase[usageOptions]{
		{args: []string{"api", "alice"}, want: usageOptions{Resource: "api", User: "alice", Max: 100}},
		{args: []string{"api", "alice", "--max", "0"}, want: usageOptions{Resource: "api", User: "alice"}},
		{args: []string{"api", "alice", "--max", "-1"}, err: "--max -1: must not be negative"},
		{args: []string{"api"}, err: "accepts 2 arg(s)"},
	})
}

func TestUsersParsing(t *testing.T) {
	checkParse(t, newCmdUsersAdd, []parseCase[usersAddOptions]{
		{args: []string{"api", "alice"}, want: usersAddOptions{Resource: "api", Key: "alice"}},
		{args: []string{"api", "alice", "--limit", "1_000"}, want: usersAddOptions{Resource: "api", Key: "alice", Limit: ptr(uint64(1000))}},
		{args: []string{"api", "alice", "--limit", "0"}, want: usersAddOptions{Resource: "api", Key: "alice", Limit: ptr(uint64(0))}},
		{args: []string{"api", "alice", "--limit", "lots"}, err: `--limit "lots"`},
		{args: []string{"api", ""}, err: "KEY: "},
	})
	checkParse(t, newCmdUsersSetLimit, []parseCase[usersSetLimitOptions]{
		{args: []string{"api", "bob", "3"}, want: usersSetLimitOptions{Resource: "api", Key: "bob", Limit: 3}},
		{args: []string{"api", "bob", "-1"}, err: "negative"},
		{args: []string{"api", "bob", "lots"}, err: `LIMIT "lots"`},
		{args: []string{"api", "bob"}, err: "accepts 3 arg(s)"},
	})
	checkParse(t, newCmdUsersShow, []parseCase[usersShowOptions]{
		{args: []string{"api", "bob"}, want: usersShowOptions{Resource: "api", Key: "bob"}},
		{args: []string{"api"}, err: "accepts 2 arg(s)"},
	})
	checkParse(t, newCmdUsersList, []parseCase[usersListOptions]{
		{args: []string{"api"}, want: usersListOptions{Resource: "api"}},
		{args: []string{}, err: "accepts 1 arg(s)"},
	})
	checkParse(t, newCmdUsersImport, []parseCase[usersImportOptions]{
		{args: []string{"api", "-"}, want: usersImportOptions{Resource: "api", File: "-"}},
		{args: []string{"api"}, err: "accepts 2 arg(s)"},
	})
}

func TestResourcesParsing(t *testing.T) {
	create := func(args ...string) []string {
		return append([]string{"x", "--kind", "requests", "--ledger", "9", "--window", "1m", "--limit", "10"}, args...)
	}
	checkParse(t, newCmdResourcesCreate, []parseCase[resourcesCreateOptions]{
		{args: create(), want: resourcesCreateOptions{Resource: ledger.Resource{Name: "x", Kind: ledger.KindRequests, Ledger: 9, Window: time.Minute, DefaultLimit: 10}}},
		{args: create("--lazy"), want: resourcesCreateOptions{Resource: ledger.Resource{Name: "x", Kind: ledger.KindRequests, Ledger: 9, Window: time.Minute, DefaultLimit: 10, Lazy: true}}},
		{
			args: []string{"usd", "--kind", "money", "--ledger", "3", "--currency", "840", "--window", "1d", "--limit", "1000"},
			want: resourcesCreateOptions{Resource: ledger.Resource{Name: "usd", Kind: ledger.KindMoney, Ledger: 3, Currency: 840, Window: 24 * time.Hour, DefaultLimit: 1000}},
		},
		{args: []string{"x", "--kind", "requests", "--ledger", "9", "--window", "1s"}, err: "--limit is required"},
		{args: []string{"x", "--kind", "money", "--ledger", "9", "--window", "1s", "--limit", "1"}, err: "--currency is required"},
		{args: create("--currency", "840"), err: "--currency: only a money resource"},
		{args: []string{"x", "--kind", "coins", "--ledger", "9", "--window", "1s", "--limit", "1"}, err: `--kind "coins"`},
		{args: []string{"x", "--kind", "requests", "--ledger", "0", "--window", "1s", "--limit", "1"}, err: `--ledger "0"`},
		{args: []string{"x", "--kind", "requests", "--ledger", "9", "--window", "60", "--limit", "1"}, err: "give a unit, e.g. 60s"},
		{args: []string{"Bad Name", "--kind", "requests", "--ledger", "9", "--window", "1s", "--limit", "1"}, err: `name "Bad Name"`},
		{args: []string{"x", "--kind", "money", "--ledger", "9", "--currency", "9", "--window", "1s", "--limit", "1"}, err: "must differ from the limit ledger"},
		{args: []string{}, err: "accepts 1 arg(s)"},
	})
	checkParse(t, newCmdResourcesList, []parseCase[resourcesListOptions]{
		{args: []string{}, want: resourcesListOptions{}},
		{args: []string{"api"}, err: `unknown command "api"`},
	})
	checkParse(t, newCmdResourcesShow, []parseCase[resourcesShowOptions]{
		{args: []string{"3"}, want: resourcesShowOptions{Resource: "3"}},
		{args: []string{"a", "b"}, err: "accepts 1 arg(s)"},
	})
}

func TestApplyParsing(t *testing.T) {
	checkParse(t, newCmdApply, []parseCase[applyOptions]{
		{args: []string{"-f", "limits.yaml"}, want: applyOptions{File: "limits.yaml"}},
		{args: []string{"--file", "-", "--dry-run"}, want: applyOptions{File: "-", DryRun: true}},
		{args: []string{}, err: "-f/--file is required"},
		{args: []string{"limits.yaml"}, err: `unknown command "limits.yaml"`},
	})
}

func TestServerParsing(t *testing.T) {
	env := func(*factory) func() serverEnv {
		return func() serverEnv { return serverEnv{Dir: "d", ClusterID: 7, Timeout: time.Second} }
	}
	up := func(f *factory, runF func(context.Context, *upOptions) error) *cobra.Command {
		return newCmdServerUp(env(f), runF)
	}
	base := serverEnv{Dir: "d", ClusterID: 7, Timeout: time.Second}
	checkParse(t, up, []parseCase[upOptions]{
		{args: []string{}, want: upOptions{serverEnv: base, launchSpec: launchSpec{Port: 3000, Replicas: 1, Development: true}}},
		{
			args: []string{"--replicas", "3", "--port", "0", "--binary", "/bin/tb", "--development=false"},
			want: upOptions{serverEnv: base, launchSpec: launchSpec{Replicas: 3, Binary: "/bin/tb"}, ReplicasGiven: true},
		},
		{args: []string{"--replicas", "0"}, err: "--replicas 0: want 1 to 6"},
		{args: []string{"--replicas", "3", "--port", "65534"}, err: "--port 65534: want 0 to 65533"},
	})
	down := func(f *factory, runF func(context.Context, *downOptions) error) *cobra.Command {
		return newCmdServerDown(env(f), runF)
	}
	checkParse(t, down, []parseCase[downOptions]{
		{args: []string{}, want: downOptions{serverEnv: base, Replica: -1}},
		{args: []string{"--replica", "1", "--kill"}, want: downOptions{serverEnv: base, Replica: 1, Kill: true}},
		{args: []string{"--purge"}, want: downOptions{serverEnv: base, Replica: -1, Purge: true}},
		{args: []string{"--purge", "--kill"}, err: "--purge stops everything"},
		{args: []string{"--replica", "9"}, err: "--replica 9"},
	})
	status := func(f *factory, runF func(context.Context, *statusOptions) error) *cobra.Command {
		return newCmdServerStatus(env(f), runF)
	}
	checkParse(t, status, []parseCase[statusOptions]{
		{args: []string{}, want: statusOptions{serverEnv: base}},
		{args: []string{"now"}, err: `unknown command "now"`},
	})
}

func TestDemoParsing(t *testing.T) {
	checkParse(t, newCmdDemo, []parseCase[demoOptions]{
		{args: []string{}, want: demoOptions{Window: 2 * time.Second}},
		{args: []string{"--window", "1m"}, want: demoOptions{Window: time.Minute}},
		{args: []string{"--window", "1.5s"}, err: "not a whole number of seconds"},
	})
}

// Every command checks its arguments, and every error of the command line
// is a usage error by its type, whatever cobra or pflag made it.
func TestUsageErrorsHaveAType(t *testing.T) {
	f := newFactory(strings.NewReader(""), io.Discard, io.Discard)
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
		f := newFactory(strings.NewReader(""), io.Discard, &stderr)
		f.global.data = t.TempDir() + "/never.journal"
		if code := run(t.Context(), args, f); code != ExitUsage {
			t.Errorf("tblimit %s = exit %d (%q), want %d", strings.Join(args, " "), code, stderr.String(), ExitUsage)
		}
	}
}

func TestFlagErrorNegativeNumber(t *testing.T) {
	_, err := parseCmd(t, newCmdAcquire, "api", "alice", "-12")
	var ue *usageError
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
	printer := func() *printer { return newPrinter(&out, true) }
	for i, want := range []error{nil, nil, denied} {
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
