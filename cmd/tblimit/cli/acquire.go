package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
)

type acquireOptions struct {
	Connect connectFunc
	Printer func() *printer

	Resource string
	User     string
	Amount   uint64
	ID       ledger.ID // zero: a new attempt
	Ref      uint64
}

func newCmdAcquire(f *factory, runF func(context.Context, *acquireOptions) error) *cobra.Command {
	opts := &acquireOptions{Connect: f.connect, Printer: f.printer}
	var req requestFlags
	cmd := &cobra.Command{
		Use:   "acquire RESOURCE USER [AMOUNT]",
		Short: "Take units of a resource for a user (exit 3 when a limit denies)",
		Long: `Take AMOUNT units (default 1: one request; for bandwidth the size in bytes) of a
resource for a user. The units return by themselves one window later.

Exits 0 when admitted and 3 when the limit denies (nothing is taken); the
output says how many units remain and, when denied, when to retry.`,
		Args:              cobra.RangeArgs(2, 3),
		ValidArgsFunction: f.completeResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if opts.User, err = keyArg("USER", args[1]); err != nil {
				return err
			}
			opts.Amount = 1
			if len(args) == 3 {
				if opts.Amount, err = parseAmount(args[2]); err != nil {
					return usagef("AMOUNT %w", err)
				}
			}
			if opts.ID, opts.Ref, err = req.parse(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return acquireRun(cmd.Context(), opts)
		},
	}
	req.bind(cmd, "an acquire")
	return cmd
}

func acquireRun(ctx context.Context, opts *acquireOptions) error {
	var d ledger.Decision
	var r ledger.Resource
	err := withResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, res ledger.Resource) (err error) {
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
		return usedID(retryable(err))
	})
	if err != nil {
		return err
	}
	out := decisionOut(r, opts.Amount, d)
	out.User = opts.User
	p := opts.Printer()
	return emitDecision(p, out, d, func() {
		printDecision(p, fmt.Sprintf("%d of %s for %q", opts.Amount, r.Name, opts.User), d)
	})
}
