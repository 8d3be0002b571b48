// Package cli implements the tblimit command line; nothing in it exits the process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// ExitCode is what the process exits with.
type ExitCode int

// The exit codes, published in README and in --help.
const (
	ExitOK     ExitCode = 0 // success; the request was admitted
	ExitError  ExitCode = 1 // something went wrong
	ExitUsage  ExitCode = 2 // the command line is wrong
	ExitDenied ExitCode = 3 // a limit denied the request (nothing was taken)
)

const exitCodeHelp = `Exit codes:
  0  success; the request was admitted
  1  error (bad input in a file, an unknown resource or user, the cluster or data file unavailable)
  2  usage error (a bad command line: unknown command or flag, a malformed argument)
  3  denied by a limit (acquire, pay: nothing was taken or paid)`

// Main runs the command line of this process and returns its exit code.
func Main() ExitCode {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stderr := os.Stderr
	f, restore := filterStderr()
	defer restore()
	if f != nil {
		nativeLogs, stderr = f, f.stderr
	}
	return Run(ctx, os.Args[1:], os.Stdin, os.Stdout, stderr)
}

// Run runs tblimit with args and returns its exit code; the end-to-end tests
// call it in-process.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) ExitCode {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ex *exitError
	if errors.As(err, &ex) {
		if ex.err != nil {
			fmt.Fprintln(stderr, "tblimit:", ex.err)
		}
		return ex.code
	}
	fmt.Fprintln(stderr, "tblimit:", err)
	if isUsage(err) || isCobraUsage(err) {
		return ExitUsage
	}
	return ExitError
}

// isCobraUsage recognizes the command-line errors cobra makes itself.
func isCobraUsage(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command ") || strings.HasPrefix(msg, "required flag(s) ") ||
		strings.HasPrefix(msg, "invalid argument ") || strings.HasPrefix(msg, "accepts ") ||
		strings.HasPrefix(msg, "requires at least ") || strings.HasPrefix(msg, "unknown flag")
}

// exitError ends a command with a given code; err, if any, is printed.
type exitError struct {
	code ExitCode
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// usageError marks an error in the command line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

func isUsage(err error) bool {
	var ue *usageError
	return errors.As(err, &ue)
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globalOptions{stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "tblimit",
		Short: "Rate, bandwidth and money limits kept as double-entry ledgers in TigerBeetle",
		Long: `tblimit provisions and operates rate, bandwidth and money limits kept as
double-entry ledgers in TigerBeetle.

It talks to a TigerBeetle cluster given by --addresses and --cluster-id, or,
without addresses, to the embedded engine kept in the data file --data, so
that what one command provisions the next one sees.

The flags marked [env] can also be set with TBLIMIT_<FLAG> (TBLIMIT_ADDRESSES,
TBLIMIT_CLUSTER_ID, TBLIMIT_DATA, TBLIMIT_OUTPUT, TBLIMIT_TIMEOUT); an explicit
flag wins. -o json prints stable JSON on stdout (fields in README);
errors go to stderr, once.

` + exitCodeHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.prepare(cmd)
		},
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(flagError)
	g.bind(root.PersistentFlags())
	root.AddGroup(
		&cobra.Group{ID: "provision", Title: "Provisioning:"},
		&cobra.Group{ID: "operate", Title: "Operations:"},
		&cobra.Group{ID: "tools", Title: "Tools:"},
	)
	for _, c := range []*cobra.Command{newResources(g), newUsers(g), newApply(g)} {
		c.GroupID = "provision"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newAcquire(g), newPay(g), newFund(g), newUsage(g)} {
		c.GroupID = "operate"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newTigerBeetle(g), newDemo()} {
		c.GroupID = "tools"
		root.AddCommand(c)
	}
	root.SetHelpCommandGroupID("tools")
	root.SetCompletionCommandGroupID("tools")
	return root
}

// flagError makes flag errors usage errors, and explains a negative number
// taken for a flag.
func flagError(_ *cobra.Command, err error) error {
	msg := err.Error()
	if i := strings.LastIndex(msg, " in -"); strings.HasPrefix(msg, "unknown shorthand flag") && i >= 0 {
		arg := msg[i+len(" in "):]
		if len(arg) > 1 && arg[1] >= '0' && arg[1] <= '9' {
			return usagef("%q: negative numbers are not allowed (amounts and limits are whole numbers)", arg)
		}
	}
	return &usageError{err}
}

// group makes cmd a noun whose verbs are its subcommands: alone it prints
// its help; with an unknown verb it is a usage error.
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
		}
		return cmd.Help()
	}
	return cmd
}

// args wraps a cobra argument check so that its errors are usage errors.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return &usageError{fmt.Errorf("%s: %w (see %s --help)", cmd.CommandPath(), err, cmd.CommandPath())}
		}
		return nil
	}
}
