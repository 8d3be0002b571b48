// Package cmdutil holds what tblimit's commands share: factory, flags, output, parsing, errors.
package cmdutil

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// Factory is what the commands share: the process's streams, the global
// flags and what derives from them (the way to the ledger, the printer of
// results, the clock). A command's constructor copies the functions it needs
// into its options, so that a test can replace them; the global flags are
// read when those functions are called, after cobra has parsed them.
type Factory struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	Global GlobalOptions
	// Clock is the embedded engine's clock and the commands' idea of now;
	// nil: the system clock. Tests set a manual one.
	Clock embedded.Clock
}

// NewFactory returns the factory of commands that use these streams.
func NewFactory(stdin io.Reader, stdout, stderr io.Writer) *Factory {
	return &Factory{In: stdin, Out: stdout, ErrOut: stderr}
}

// ConnectFunc opens the ledger: the cluster, or the embedded engine's data
// file. The caller must call the returned function when done.
type ConnectFunc func(ctx context.Context) (*ledger.Client, func(), error)

// Connect is the ConnectFunc of the global flags.
func (f *Factory) Connect(ctx context.Context) (*ledger.Client, func(), error) {
	return f.Global.connect(f.Clock, f.ErrOut)
}

// Printer returns the printer of the command's results (-o).
func (f *Factory) Printer() *Printer { return NewPrinter(f.Out, f.Global.Output == "json") }

// Now is the time: the test's clock in tests, else the system's.
func (f *Factory) Now() time.Time {
	if f.Clock != nil {
		return f.Clock.Now()
	}
	return time.Now()
}

// WithLedger opens the ledger, runs fn and closes the ledger again.
func WithLedger(ctx context.Context, connect ConnectFunc, fn func(*ledger.Client) error) error {
	c, done, err := connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	return fn(c)
}

// WithResource is the preamble of the commands that take a RESOURCE
// argument: it opens the ledger, resolves the resource by name or ledger
// number, runs fn and closes the ledger again.
func WithResource(ctx context.Context, connect ConnectFunc, arg string, fn func(*ledger.Client, ledger.Resource) error) error {
	return WithLedger(ctx, connect, func(c *ledger.Client) error {
		r, err := Resolve(ctx, c, arg)
		if err != nil {
			return err
		}
		return fn(c, r)
	})
}

// Resolve finds a resource by name, or by ledger number.
func Resolve(ctx context.Context, c *ledger.Client, arg string) (ledger.Resource, error) {
	all, err := c.Resources(ctx)
	if err != nil {
		return ledger.Resource{}, err
	}
	var named []ledger.Resource
	for _, r := range all {
		if r.Name == arg {
			named = append(named, r)
		}
	}
	switch len(named) {
	case 1:
		return named[0], nil
	case 0:
	default:
		return ledger.Resource{}, fmt.Errorf("resource %q is ambiguous: ledgers %d and %d both have that name; give the ledger number", arg, named[0].Ledger, named[1].Ledger)
	}
	if n, err := strconv.ParseUint(arg, 10, 32); err == nil {
		for _, r := range all {
			if uint64(r.Ledger) == n {
				return r, nil
			}
		}
	}
	names := make([]string, len(all))
	for i, r := range all {
		names[i] = r.Name
	}
	known := "there are none yet: create one with tblimit resources create"
	if len(names) > 0 {
		known = "known: " + strings.Join(names, ", ")
	}
	return ledger.Resource{}, Hint(fmt.Errorf("%w %q", ledger.ErrUnknownResource, arg), "%s", known)
}

// CompleteResources completes a resource argument with the names of the
// resources there are.
func (f *Factory) CompleteResources(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 || f.Global.Prepare(cmd) != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
	defer cancel()
	var out []cobra.Completion
	_ = WithLedger(ctx, f.Connect, func(c *ledger.Client) error {
		rs, err := c.Resources(ctx)
		for _, r := range rs {
			out = append(out, cobra.CompletionWithDesc(r.Name, r.String()))
		}
		return err
	})
	return out, cobra.ShellCompDirectiveNoFileComp
}

// OpenFunc opens the file a command reads: standard input for "-". It
// returns the name to use in messages and a function that closes what it
// opened.
type OpenFunc func(file string) (name string, r io.Reader, closeFn func(), err error)

// Open is the OpenFunc of the process.
func (f *Factory) Open(file string) (string, io.Reader, func(), error) {
	if file == "-" {
		return "stdin", f.In, func() {}, nil
	}
	in, err := os.Open(file)
	if err != nil {
		return "", nil, nil, err
	}
	return file, in, func() { in.Close() }, nil
}
