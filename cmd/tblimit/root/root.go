// Package root runs the tblimit command line; nothing in it exits the process.
//
// Main and Run build the command tree from the packages beside this one, a
// package per noun (resources, users, tigerbeetle) or verb (acquire, pay,
// fund, usage, history, audit, apply, serve, demo), with what they share in
// internal/cmdutil. Every command has the shape of GitHub's gh: an options
// struct whose dependencies are functions (taken from the factory), a
// constructor NewCmdX(f, runF) that parses arguments and flags into the
// options, and a run function xRun(ctx, opts). Tests give the constructor a
// runF that captures the options, so parsing is tested without a ledger.
// Errors become exit codes and messages in one place (Factory.Exit). The
// end-to-end tests, which run tblimit in-process through Run, are here.
package root

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/acquire"
	"github.com/tblimit/tblimit/cmd/tblimit/apply"
	"github.com/tblimit/tblimit/cmd/tblimit/audit"
	"github.com/tblimit/tblimit/cmd/tblimit/demo"
	"github.com/tblimit/tblimit/cmd/tblimit/fund"
	"github.com/tblimit/tblimit/cmd/tblimit/history"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/cmd/tblimit/pay"
	"github.com/tblimit/tblimit/cmd/tblimit/reserve"
	"github.com/tblimit/tblimit/cmd/tblimit/resources"
	"github.com/tblimit/tblimit/cmd/tblimit/serve"
	"github.com/tblimit/tblimit/cmd/tblimit/tigerbeetle"
	"github.com/tblimit/tblimit/cmd/tblimit/usage"
	"github.com/tblimit/tblimit/cmd/tblimit/users"
)

// Main runs the command line of this process and returns its exit code.
func Main() cmdutil.ExitCode {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stderr, restore := cmdutil.FilterNativeLogs()
	defer restore()
	return Run(ctx, os.Args[1:], os.Stdin, os.Stdout, stderr)
}

// Run runs tblimit with args and returns its exit code; the end-to-end tests
// call it in-process.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) cmdutil.ExitCode {
	return run(ctx, args, cmdutil.NewFactory(stdin, stdout, stderr))
}

// run runs tblimit with args on the streams and clock of f.
func run(ctx context.Context, args []string, f *cmdutil.Factory) cmdutil.ExitCode {
	root := newRoot(f)
	root.SetArgs(args)
	return f.Exit(root.ExecuteContext(ctx))
}

func newRoot(f *cmdutil.Factory) *cobra.Command {
	root := cmdutil.Group(&cobra.Command{
		Use:   "tblimit",
		Short: "Rate, bandwidth and money limits kept as double-entry ledgers in TigerBeetle",
		Long: `tblimit provisions and operates rate, bandwidth and money limits kept as
double-entry ledgers in TigerBeetle.

It talks to a TigerBeetle cluster given by --addresses and --cluster-id, or,
without addresses, to the embedded engine kept in the data file --data, so
that what one command provisions the next one sees.

The flags marked [env] can also be set with TBLIMIT_<FLAG> (TBLIMIT_ADDRESSES,
TBLIMIT_CLUSTER_ID, TBLIMIT_DATA, TBLIMIT_OUTPUT, TBLIMIT_TIMEOUT); an explicit
flag wins. -o json prints stable JSON on stdout (fields in docs/cli.md);
errors go to stderr, once.

` + cmdutil.ExitCodeHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return f.Global.Prepare(cmd)
		},
	})
	root.SetIn(f.In)
	root.SetOut(f.Out)
	root.SetErr(f.ErrOut)
	f.Global.Bind(root.PersistentFlags())
	root.AddGroup(
		&cobra.Group{ID: "provision", Title: "Provisioning:"},
		&cobra.Group{ID: "operate", Title: "Operations:"},
		&cobra.Group{ID: "tools", Title: "Tools:"},
	)
	for _, c := range []*cobra.Command{resources.NewCmdResources(f), users.NewCmdUsers(f), apply.NewCmdApply(f, nil)} {
		c.GroupID = "provision"
		root.AddCommand(c)
	}
	serveCmd := serve.NewCmdServe(f, nil)
	for _, c := range []*cobra.Command{acquire.NewCmdAcquire(f, nil), reserve.NewCmdReserve(f, nil), reserve.NewCmdCommit(f, nil), reserve.NewCmdCancel(f, nil),
		pay.NewCmdPay(f, nil), fund.NewCmdFund(f, nil), usage.NewCmdUsage(f, nil),
		history.NewCmdHistory(f, nil), audit.NewCmdAudit(f, nil), serveCmd} {
		c.GroupID = "operate"
		root.AddCommand(c)
	}
	tools := []*cobra.Command{tigerbeetle.NewCmdTigerBeetle(f), demo.NewCmdDemo(f, nil)}
	for _, c := range tools {
		c.GroupID = "tools"
		root.AddCommand(c)
	}
	// serve holds the ledger, tigerbeetle runs a local server, demo an
	// in-memory engine: none acts through --server.
	for _, c := range append(tools, serveCmd) {
		cmdutil.Local(c)
	}
	root.SetHelpCommandGroupID("tools")
	root.SetCompletionCommandGroupID("tools")
	root.InitDefaultCompletionCmd()
	cmdutil.UsageConventions(root)
	return root
}
