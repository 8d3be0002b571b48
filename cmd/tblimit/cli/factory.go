package cli

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

// factory is what the commands share: the process's streams, the global
// flags and what derives from them (the way to the ledger, the printer of
// results, the clock). A command's constructor copies the functions it needs
// into its options, so that a test can replace them; the global flags are
// read when those functions are called, after cobra has parsed them.
type factory struct {
	in     io.Reader
	out    io.Writer
	errOut io.Writer
	global globalOptions
	// clock is the embedded engine's clock and the commands' idea of now;
	// nil: the system clock. Tests set a manual one.
	clock embedded.Clock
}

func newFactory(stdin io.Reader, stdout, stderr io.Writer) *factory {
	return &factory{in: stdin, out: stdout, errOut: stderr}
}

// connectFunc opens the ledger: the cluster, or the embedded engine's data
// file. The caller must call the returned function when done.
type connectFunc func(ctx context.Context) (*ledger.Client, func(), error)

// connect is the connectFunc of the global flags.
func (f *factory) connect(ctx context.Context) (*ledger.Client, func(), error) {
	return f.global.connect(f.clock, f.errOut)
}

// printer returns the printer of the command's results (-o).
func (f *factory) printer() *printer { return newPrinter(f.out, f.global.output == "json") }

// now is the time: the test's clock in tests, else the system's.
func (f *factory) now() time.Time {
	if f.clock != nil {
		return f.clock.Now()
	}
	return time.Now()
}

// withLedger opens the ledger, runs fn and closes the ledger again.
func withLedger(ctx context.Context, connect connectFunc, fn func(*ledger.Client) error) error {
	c, done, err := connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	return fn(c)
}

// withResource is the preamble of the commands that take a RESOURCE
// argument: it opens the ledger, resolves the resource by name or ledger
// number, runs fn and closes the ledger again.
func withResource(ctx context.Context, connect connectFunc, arg string, fn func(*ledger.Client, ledger.Resource) error) error {
	return withLedger(ctx, connect, func(c *ledger.Client) error {
		r, err := resolve(ctx, c, arg)
		if err != nil {
			return err
		}
		return fn(c, r)
	})
}

// resolve finds a resource by name, or by ledger number.
func resolve(ctx context.Context, c *ledger.Client, arg string) (ledger.Resource, error) {
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
	return ledger.Resource{}, hint(fmt.Errorf("%w %q", ledger.ErrUnknownResource, arg), "%s", known)
}

// completeResources completes a resource argument with the names of the
// resources there are.
func (f *factory) completeResources(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 || f.global.prepare(cmd) != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
	defer cancel()
	var out []cobra.Completion
	_ = withLedger(ctx, f.connect, func(c *ledger.Client) error {
		rs, err := c.Resources(ctx)
		for _, r := range rs {
			out = append(out, cobra.CompletionWithDesc(r.Name, r.String()))
		}
		return err
	})
	return out, cobra.ShellCompDirectiveNoFileComp
}

// openFunc opens the file a command reads: standard input for "-". It
// returns the name to use in messages and a function that closes what it
// opened.
type openFunc func(file string) (name string, r io.Reader, closeFn func(), err error)

// open is the openFunc of the process.
func (f *factory) open(file string) (string, io.Reader, func(), error) {
	if file == "-" {
		return "stdin", f.in, func() {}, nil
	}
	in, err := os.Open(file)
	if err != nil {
		return "", nil, nil, err
	}
	return file, in, func() { in.Close() }, nil
}
