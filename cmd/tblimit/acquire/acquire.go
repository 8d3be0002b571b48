// Package acquire is tblimit acquire: take units of a resource for a user.
package acquire

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

type acquireOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	Resource string
	User     string
	Amount   uint64
	ID       ledger.ID // zero: a new attempt
	Ref      uint64
}

// NewCmdAcquire returns tblimit acquire; runF, when not nil, runs instead of
// acquireRun (tests give one that captures the options).
func NewCmdAcquire(f *cmdutil.Factory, runF func(context.Context, *acquireOptions) error) *cobra.Command {
	opts := &acquireOptions{Connect: f.Connect, Printer: f.Printer}
	var req cmdutil.RequestFlags
	cmd := &cobra.Command{
		Use:   "acquire RESOURCE USER [AMOUNT]",
		Short: "Take units of a resource for a user (exit 3 when a limit denies)",
		Long: `Take AMOUNT units (default 1: one request; for bandwidth the size in bytes) of a
resource for a user. The units return by themselves one window later.

Exits 0 when admitted and 3 when the limit denies (nothing is taken); the
output says how many units remain and, when denied, when to retry.`,
		Args:              cobra.RangeArgs(2, 3),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if opts.User, err = cmdutil.KeyArg("USER", args[1]); err != nil {
				return err
			}
			opts.Amount = 1
			if len(args) == 3 {
				if opts.Amount, err = cmdutil.ParseAmount(args[2]); err != nil {
					return cmdutil.Usagef("AMOUNT %w", err)
				}
			}
			if opts.ID, opts.Ref, err = req.Parse(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return acquireRun(cmd.Context(), opts)
		},
	}
	req.Bind(cmd, "an acquire")
	return cmd
}

func acquireRun(ctx context.Context, opts *acquireOptions) error {
	var d ledger.Decision
	var r ledger.Resource
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, res ledger.Resource) (err error) {
		r = res
		if r.Kind == ledger.KindMoney {
			return fmt.Errorf("%s is a money resource: use tblimit pay", r.Name)
		}
		if !r.Lazy {
			// Check first, so that an unknown user writes nothing at all.
			if _, err := c.Inspect(ctx, r, opts.User); err != nil {
				return err
			}
		}
		d, err = c.Acquire(ctx, r, ledger.Request{User: opts.User, Amount: opts.Amount, ID: opts.ID, Ref: opts.Ref})
		return cmdutil.UsedID(cmdutil.Retryable(err))
	})
	if err != nil {
		return err
	}
	out := cmdutil.DecisionOut(r, opts.Amount, d)
	out.User = opts.User
	p := opts.Printer()
	return cmdutil.EmitDecision(p, out, d, func() {
		cmdutil.PrintDecision(p, fmt.Sprintf("%d of %s for %q", opts.Amount, r.Name, opts.User), d)
	})
}
