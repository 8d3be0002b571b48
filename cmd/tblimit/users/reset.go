package users

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

type usersResetOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	Resource string
	Key      string
}

// userResetJSON is a user's state after users reset, and how many holds
// the reset ended.
type userResetJSON struct {
	UserJSON
	Ended int `json:"ended"`
}

func newCmdUsersReset(f *cmdutil.Factory, runF func(context.Context, *usersResetOptions) error) *cobra.Command {
	opts := &usersResetOptions{Connect: f.Connect, Printer: f.Printer}
	return &cobra.Command{
		Use:   "reset RESOURCE KEY",
		Short: "Give back at once every unit a user holds",
		Long: `Give back at once every unit a user holds on a resource: each of its
holds in flight is voided, so that its whole limit is available again.
It is an operator's act, and the audit trail keeps it: a void per hold
(tblimit usage lists them before). Units taken while it runs are not given
back. Resetting a user with nothing in flight changes nothing.`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if opts.Key, err = cmdutil.KeyArg("KEY", args[1]); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return usersResetRun(cmd.Context(), opts)
		},
	}
}

func usersResetRun(ctx context.Context, opts *usersResetOptions) error {
	var out userResetJSON
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, r ledger.Resource) (err error) {
		if out.Ended, err = c.Reset(ctx, r, opts.Key); err != nil {
			return err
		}
		out.UserJSON, err = userState(ctx, c, r, opts.Key)
		return err
	})
	if err != nil {
		return err
	}
	p := opts.Printer()
	return p.Emit(out, func() {
		p.Printf("reset %q on %s: %s voided; limit %d, %d in flight, %d available\n",
			opts.Key, out.Resource, cmdutil.Plural(out.Ended, "hold"), out.Limit, out.InFlight, out.Available)
	})
}
