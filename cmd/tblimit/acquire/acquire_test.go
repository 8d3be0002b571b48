package acquire

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

func TestAcquireParsing(t *testing.T) {
	cmdtest.CheckParse(t, NewCmdAcquire, []cmdtest.ParseCase[acquireOptions]{
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

func TestFlagErrorNegativeNumber(t *testing.T) {
	_, err := cmdtest.ParseCmd(t, NewCmdAcquire, "api", "alice", "-12")
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
}
