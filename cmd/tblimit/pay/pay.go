// Package pay is tblimit pay: pay from one user to another under a money limit.
package pay

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

type payOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	Resource string
	From, To string
	Amount   uint64
	ID       ledger.ID // zero: a new attempt
	Ref      uint64
}

// NewCmdPay returns tblimit pay; runF, when not nil, runs instead of payRun.
func NewCmdPay(f *cmdutil.Factory, runF func(context.Context, *payOptions) error) *cobra.Command {
	opts := &payOptions{Connect: f.Connect, Printer: f.Printer}
	var req cmdutil.RequestFlags
	cmd := &cobra.Command{
		Use:   "pay RESOURCE FROM TO AMOUNT",
		Short: "Pay under a money limit (exit 3 when the limit or the funds deny)",
		Long: `Pay AMOUNT (in the currency's smallest unit) from one user to another under a
money resource's limit: a hold on the limit ledger linked to the payment on
the currency ledger, so that both happen or neither does.

Both users need an account on the currency ledger (tblimit users add), and
FROM the funds (tblimit fund). Exits 0 when paid and 3 when denied, by the
limit or for lack of funds: then nothing at all moved.`,
		Args:              cobra.ExactArgs(4),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if opts.From, err = cmdutil.KeyArg("FROM", args[1]); err != nil {
				return err
			}
			if opts.To, err = cmdutil.KeyArg("TO", args[2]); err != nil {
				return err
			}
			if opts.From == opts.To {
				return cmdutil.Usagef("FROM and TO are both %q: a user cannot pay itself", opts.From)
			}
			if opts.Amount, err = cmdutil.ParseAmount(args[3]); err != nil {
				return cmdutil.Usagef("AMOUNT %w", err)
			}
			if opts.ID, opts.Ref, err = req.Parse(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return payRun(cmd.Context(), opts)
		},
	}
	req.Bind(cmd, "a payment")
	return cmd
}

func payRun(ctx context.Context, opts *payOptions) error {
	var d ledger.Decision
	var r ledger.Resource
	var funds uint64
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, res ledger.Resource) (err error) {
		r = res
		if r.Kind != ledger.KindMoney {
			return fmt.Errorf("%s is a %s resource, not money: use tblimit acquire", r.Name, r.Kind)
		}
		// Check first, so that an unknown user writes nothing at all.
		if _, err := c.Inspect(ctx, r, opts.From); err != nil {
			return err
		}
		for _, u := range []string{opts.From, opts.To} {
			if _, err := c.Funds(ctx, r.Currency, u); err != nil {
				return cmdutil.Hint(err, "tblimit users add %s %s opens it", r.Name, u)
			}
		}
		d, err = c.Pay(ctx, r, ledger.Payment{From: opts.From, To: opts.To, Amount: opts.Amount, ID: opts.ID, Ref: opts.Ref})
		if err != nil {
			return cmdutil.UsedID(cmdutil.Retryable(err))
		}
		funds, err = c.Funds(ctx, r.Currency, opts.From)
		return err
	})
	if err != nil {
		return err
	}
	out := cmdutil.DecisionOut(r, opts.Amount, d)
	out.From, out.To, out.Funds = opts.From, opts.To, &funds
	p := opts.Printer()
	return cmdutil.EmitDecision(p, out, d, func() {
		cmdutil.PrintDecision(p, fmt.Sprintf("pay %d from %q to %q on %s", opts.Amount, opts.From, opts.To, r.Name), d)
		p.Printf("%q holds %d\n", opts.From, funds)
	})
}
