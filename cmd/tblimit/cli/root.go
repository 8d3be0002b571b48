// Package cli implements the tblimit command line; nothing in it exits the process.
//
// Every command has the shape of GitHub's gh: an options struct whose
// dependencies are functions (taken from the factory), a constructor
// newCmdX(f, runF) that parses arguments and flags into the options, and a
// run function xRun(ctx, opts). Tests give the constructor a runF that
// captures the options, so parsing is tested without a ledger. Errors become
// exit codes and messages in one place (factory.exit).
package cli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// ExitCode is what the process exits with.
type ExitCode int

// The exit codes, published in docs/cli.md and in --help.
const (
	ExitOK        ExitCode = 0 // success; the request was admitted
	ExitError     ExitCode = 1 // something went wrong
	ExitUsage     ExitCode = 2 // the command line is wrong
	ExitDenied    ExitCode = 3 // a limit denied the request (nothing was taken)
	ExitOverLimit ExitCode = 4 // audit found a user over its limit
)

const exitCodeHelp = `Exit codes:
  0  success; the request was admitted
  1  error (bad input in a file, an unknown resource or user, the cluster or data file unavailable)
  2  usage error (a bad command line: unknown command or flag, a malformed argument)
  3  denied by a limit (acquire, pay: nothing was taken or paid)
  4  audit found a user over its limit in a window or in flight`

// Main runs the command line of this process and returns its exit code.
func Main() ExitCode {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stderr := os.Stderr
	filter, restore := filterStderr()
	defer restore()
	if filter != nil {
		nativeLogs, stderr = filter, filter.stderr
	}
	return Run(ctx, os.Args[1:], os.Stdin, os.Stdout, stderr)
}

// Run runs tblimit with args and returns its exit code; the end-to-end tests
// call it in-process.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) ExitCode {
	return run(ctx, args, newFactory(stdin, stdout, stderr))
}

// run runs tblimit with args on the streams and clock of f.
func run(ctx context.Context, args []string, f *factory) ExitCode {
	root := newRoot(f)
	root.SetArgs(args)
	return f.exit(root.ExecuteContext(ctx))
}

func newRoot(f *factory) *cobra.Command {
	root := group(&cobra.Command{
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
			return f.global.prepare(cmd)
		},
	})
	root.SetIn(f.in)
	root.SetOut(f.out)
	root.SetErr(f.errOut)
	f.global.bind(root.PersistentFlags())
	root.AddGroup(
		&cobra.Group{ID: "provision", Title: "Provisioning:"},
		&cobra.Group{ID: "operate", Title: "Operations:"},
		&cobra.Group{ID: "tools", Title: "Tools:"},
	)
	for _, c := range []*cobra.Command{newCmdResources(f), newCmdUsers(f), newCmdApply(f, nil)} {
		c.GroupID = "provision"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newCmdAcquire(f, nil), newCmdPay(f, nil), newCmdFund(f, nil), newCmdUsage(f, nil),
		newCmdHistory(f, nil), newCmdAudit(f, nil), newCmdServe(f, nil)} {
		c.GroupID = "operate"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newCmdTigerBeetle(f), newCmdDemo(f, nil)} {
		c.GroupID = "tools"
		root.AddCommand(c)
	}
	root.SetHelpCommandGroupID("tools")
	root.SetCompletionCommandGroupID("tools")
	root.InitDefaultCompletionCmd()
	usageConventions(root)
	return root
}

// group makes cmd a noun whose verbs are its subcommands: alone it prints
// its help; with an unknown verb it is a usage error.
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			return usagef("unknown command %q for %q (did you mean %s?)", args[0], cmd.CommandPath(), s[0])
		}
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return cmd
}
