// Package fund is tblimit fund: credit a user's currency account.
package fund

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

type fundOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	Resource string
	User     string
	Amount   uint64
	ID       ledger.ID // never zero: --id, or a new one
}

// NewCmdFund returns tblimit fund; runF, when not nil, runs instead of fundRun.
func NewCmdFund(f *cmdutil.Factory, runF func(context.Context, *fundOptions) error) *cobra.Command {
	opts := &fundOptions{Connect: f.Connect, Printer: f.Printer}
	var id string
	cmd := &cobra.Command{
		Use:   "fund RESOURCE USER AMOUNT [--id ID]",
		Short: "Credit a user's currency account from the currency's operator",
		Long: `Credit AMOUNT (in the currency's smallest unit) to a user's account on a money
resource's currency ledger, from the currency ledger's operator account. The
user needs that account (tblimit users add RESOURCE USER).

Give --id to make a retry safe: funding again with the same ID and amount is
not applied twice. The output includes the ID used.`,
		Args:              cobra.ExactArgs(3),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if opts.User, err = cmdutil.KeyArg("USER", args[1]); err != nil {
				return err
			}
			if opts.Amount, err = cmdutil.ParseAmount(args[2]); err != nil {
				return cmdutil.Usagef("AMOUNT %w", err)
			}
			if opts.ID, err = cmdutil.ParseID(id); err != nil {
				return err
			}
			if opts.ID.IsZero() {
				opts.ID = ledger.NewID()
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return fundRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "the transfer's ID (32 hex digits), for a safe retry (default: a new one)")
	return cmd
}

func fundRun(ctx context.Context, opts *fundOptions) error {
	out := JSON{User: opts.User, Amount: opts.Amount, ID: opts.ID.String()}
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, r ledger.Resource) (err error) {
		if r.Kind != ledger.KindMoney {
			return fmt.Errorf("%s is a %s resource: only money resources have funds", r.Name, r.Kind)
		}
		out.Resource, out.CurrencyLedger = r.Name, r.Currency
		addFirst := func(err error) error {
			return cmdutil.Hint(err, "add the user first: tblimit users add %s %s", r.Name, opts.User)
		}
		if _, err := c.Funds(ctx, r.Currency, opts.User); err != nil {
			return addFirst(err)
		}
		err = c.Fund(ctx, r.Currency, ledger.Request{User: opts.User, Amount: opts.Amount, ID: opts.ID})
		switch {
		case errors.Is(err, ledger.ErrUnknownUser):
			return addFirst(err)
		case err != nil:
			return cmdutil.UsedID(cmdutil.Retryable(err))
		}
		out.Funds, err = c.Funds(ctx, r.Currency, opts.User)
		return err
	})
	if err != nil {
		return err
	}
	p := opts.Printer()
	return p.Emit(out, func() {
		p.Printf("funded %q with %d on currency ledger %d (id %s); %q holds %d\n", opts.User, opts.Amount, out.CurrencyLedger, out.ID, opts.User, out.Funds)
	})
}

// JSON is the answer to fund.
type JSON struct {
	Resource       string `json:"resource"`
	CurrencyLedger uint32 `json:"currency_ledger"`
	User           string `json:"user"`
	Amount         uint64 `json:"amount"`
	Funds          uint64 `json:"funds"` // what the user holds afterwards
	ID             string `json:"id"`    // give it to --id to retry safely
}
