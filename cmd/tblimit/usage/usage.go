// Package usage is tblimit usage: a user's units in flight and when each returns.
package usage

import (
	"context"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

type usageOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer
	Now     func() time.Time

	Resource string
	User     string
	Max      int // at most this many flights; 0: all
}

// NewCmdUsage returns tblimit usage; runF, when not nil, runs instead of usageRun.
func NewCmdUsage(f *cmdutil.Factory, runF func(context.Context, *usageOptions) error) *cobra.Command {
	opts := &usageOptions{Connect: f.Connect, Printer: f.Printer, Now: f.Now}
	cmd := &cobra.Command{
		Use:               "usage RESOURCE USER",
		Short:             "List a user's units in flight and when each returns",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if opts.User, err = cmdutil.KeyArg("USER", args[1]); err != nil {
				return err
			}
			if opts.Max < 0 {
				return cmdutil.Usagef("--max %d: must not be negative", opts.Max)
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
	out := JSON{User: opts.User, Flights: []flightJSON{}}
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, r ledger.Resource) error {
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
				ReturnsInSeconds: cmdutil.Seconds(max(f.Returns.Sub(now), 0)),
				Ref:              f.Ref,
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	p := opts.Printer()
	return p.Emit(out, func() {
		if p.TTY || len(out.Flights) == 0 {
			p.Printf("%q on %s: limit %d, %d in flight, %d available\n", opts.User, out.Resource, out.Limit, out.InFlight, out.Available)
		}
		rows := make([][]string, len(out.Flights))
		for i, r := range out.Flights {
			rows[i] = []string{r.ID, cmdutil.U64(r.Amount), r.Taken, r.Returns, cmdutil.Human(cmdutil.SecondsDuration(r.ReturnsInSeconds)), strconv.FormatUint(r.Ref, 10)}
		}
		if len(rows) > 0 {
			p.Table([]string{"ID", "AMOUNT", "TAKEN", "RETURNS", "RETURNS IN", "REF"}, rows)
		}
	})
}

// JSON is the answer to usage: a user's units in flight.
type JSON struct {
	Resource  string       `json:"resource"`
	User      string       `json:"user"`
	Limit     uint64       `json:"limit"`
	InFlight  uint64       `json:"in_flight"`
	Available uint64       `json:"available"`
	Flights   []flightJSON `json:"flights"` // the ones that return first first
}

// flightJSON is one hold in flight (ledger.Flight).
type flightJSON struct {
	ID               string  `json:"id"`
	Amount           uint64  `json:"amount"`
	Taken            string  `json:"taken"`
	Returns          string  `json:"returns"`
	ReturnsInSeconds float64 `json:"returns_in_seconds"`
	Ref              uint64  `json:"ref"`
}
