package cli

import (
	"context"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
)

type usageOptions struct {
	Connect connectFunc
	Printer func() *printer
	Now     func() time.Time

	Resource string
	User     string
	Max      int // at most this many flights; 0: all
}

func newCmdUsage(f *factory, runF func(context.Context, *usageOptions) error) *cobra.Command {
	opts := &usageOptions{Connect: f.connect, Printer: f.printer, Now: f.now}
	cmd := &cobra.Command{
		Use:               "usage RESOURCE USER",
		Short:             "List a user's units in flight and when each returns",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: f.completeResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if opts.User, err = keyArg("USER", args[1]); err != nil {
				return err
			}
			if opts.Max < 0 {
				return usagef("--max %d: must not be negative", opts.Max)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return usageRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.Max, "max", 100, "list at most this many holds in flight, those that return first (0: all)")
	return cmd
}

func usageRun(ctx context.Context, opts *usageOptions) error {
	out := usageJSON{User: opts.User, Flights: []flightJSON{}}
	err := withResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, r ledger.Resource) error {
		out.Resource = r.Name
		u, err := c.Inspect(ctx, r, opts.User)
		if err != nil {
			return err
		}
		out.Limit, out.InFlight, out.Available = u.Limit, u.InFlight, u.Available
		flights, err := c.Flights(ctx, r, opts.User, opts.Max)
		if err != nil {
			return err
		}
		now := opts.Now()
		for _, f := range flights {
			out.Flights = append(out.Flights, flightJSON{
				ID:               f.ID.String(),
				Amount:           f.Amount,
				Taken:            f.Taken.UTC().Format(time.RFC3339Nano),
				Returns:          f.Returns.UTC().Format(time.RFC3339Nano),
				ReturnsInSeconds: seconds(max(f.Returns.Sub(now), 0)),
				Ref:              f.Ref,
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	out.Reservations = out.Flights
	p := opts.Printer()
	return p.emit(out, func() {
		if p.tty || len(out.Flights) == 0 {
			p.printf("%q on %s: limit %d, %d in flight, %d available\n", opts.User, out.Resource, out.Limit, out.InFlight, out.Available)
		}
		rows := make([][]string, len(out.Flights))
		for i, r := range out.Flights {
			rows[i] = []string{r.ID, u64(r.Amount), r.Taken, r.Returns, human(secondsDuration(r.ReturnsInSeconds)), strconv.FormatUint(r.Ref, 10)}
		}
		if len(rows) > 0 {
			p.table([]string{"ID", "AMOUNT", "TAKEN", "RETURNS", "RETURNS IN", "REF"}, rows)
		}
	})
}
