// Package reserve is tblimit reserve, commit and cancel: units held for
// work whose cost is known after it is done, and payments authorized, then
// captured or released.
package reserve

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

type reserveOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	Resource string
	User     string
	Amount   uint64
	Payee    string        // money: the payment's payee
	Timeout  time.Duration // money: the authorization's timeout; 0 is the window
	ID       ledger.ID
	Ref      uint64
}

// ReservationJSON is the answer to reserve: the decision and, when
// admitted, the reservation's ID for commit and cancel.
type ReservationJSON struct {
	cmdutil.DecisionJSON
	Reservation string `json:"reservation,omitempty"`
}

// NewCmdReserve returns tblimit reserve; runF, when not nil, runs instead
// of reserveRun.
func NewCmdReserve(f *cmdutil.Factory, runF func(context.Context, *reserveOptions) error) *cobra.Command {
	opts := &reserveOptions{Connect: f.Connect, Printer: f.Printer}
	var req cmdutil.RequestFlags
	var timeout string
	cmd := &cobra.Command{
		Use:   "reserve RESOURCE USER [AMOUNT]",
		Short: "Hold units until commit or cancel; on money, authorize a payment (exit 3 when denied)",
		Long: `Hold AMOUNT units (default 1) of USER's limit, for work whose cost is known
only once it is done: print the reservation's ID, then end it with
tblimit commit (keep what the work used: it stays counted until the
reservation's window ends, and the rest comes back at once) or tblimit cancel
(give it all back). One neither committed nor cancelled expires after the
resource's window, and its units come back. Nothing a reservation does lowers
a limit for good.

On a money resource, reserve authorizes a payment from USER to --payee: the
limit and the money are held, linked, both or neither. commit captures (all,
or less: the rest of both comes back), cancel releases; one neither captured
nor released expires after --timeout (default the window).

Exits 0 when reserved and 3 when denied (nothing was held).`,
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
			if opts.Payee != "" {
				if opts.Payee, err = cmdutil.KeyArg("--payee", opts.Payee); err != nil {
					return err
				}
				if opts.Payee == opts.User {
					return cmdutil.Usagef("USER and --payee are both %q: a user cannot pay itself", opts.User)
				}
			}
			if timeout != "" {
				if opts.Timeout, err = cmdutil.ParseWindow(timeout); err != nil {
					return cmdutil.Usagef("--timeout %w", err)
				}
				if opts.Payee == "" {
					return cmdutil.Usagef("--timeout is an authorization's: it needs --payee")
				}
			}
			if opts.ID, opts.Ref, err = req.Parse(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return reserveRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Payee, "payee", "", "on a money resource: authorize a payment to this user")
	cmd.Flags().StringVar(&timeout, "timeout", "", "with --payee: how long the authorization holds (whole seconds, at most the window; default the window)")
	req.Bind(cmd, "a reservation")
	return cmd
}

func reserveRun(ctx context.Context, opts *reserveOptions) error {
	var rv *ledger.Reservation
	var r ledger.Resource
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, res ledger.Resource) (err error) {
		r = res
		money := r.Kind == ledger.KindMoney
		switch {
		case money && opts.Payee == "":
			return cmdutil.Usagef("%s is a money resource: a reservation on it authorizes a payment, name its --payee", r.Name)
		case !money && opts.Payee != "":
			return cmdutil.Usagef("%s is a %s resource: --payee is for money resources", r.Name, r.Kind)
		case money:
			for _, u := range []string{opts.User, opts.Payee} {
				if _, err := c.Funds(ctx, r.Currency, u); err != nil {
					return cmdutil.Hint(err, "tblimit users add %s %s opens it", r.Name, u)
				}
			}
			rv, err = c.Authorize(ctx, r, ledger.Payment{From: opts.User, To: opts.Payee, Amount: opts.Amount, ID: opts.ID, Ref: opts.Ref, Timeout: opts.Timeout})
		default:
			rv, err = c.Reserve(ctx, r, ledger.Request{User: opts.User, Amount: opts.Amount, ID: opts.ID, Ref: opts.Ref})
		}
		if err != nil {
			return cmdutil.UsedID(cmdutil.Retryable(err))
		}
		return nil
	})
	if err != nil {
		return err
	}
	d := rv.Decision()
	out := ReservationJSON{DecisionJSON: cmdutil.DecisionOut(r, opts.Amount, d)}
	out.User, out.To = opts.User, opts.Payee
	if rv.OK() {
		out.Reservation = rv.Hold().String()
	}
	p := opts.Printer()
	return cmdutil.EmitDecision(p, out, d, func() {
		what := fmt.Sprintf("reserve %d for %q on %s", opts.Amount, opts.User, r.Name)
		if opts.Payee != "" {
			what = fmt.Sprintf("authorize %d from %q to %q on %s", opts.Amount, opts.User, opts.Payee, r.Name)
		}
		cmdutil.PrintDecision(p, what, d)
		if rv.OK() {
			p.Printf("reservation %s: end it with tblimit commit or tblimit cancel\n", out.Reservation)
		}
	})
}

type endOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	Reservation ledger.ID
	Amount      uint64 // commit: 0 keeps all
}

// EndJSON is the answer to commit and cancel.
type EndJSON struct {
	Reservation string `json:"reservation"`
	Resource    string `json:"resource"`
	Ended       string `json:"ended"` // committed or cancelled
	Amount      uint64 `json:"amount,omitempty"`
}

// NewCmdCommit returns tblimit commit; runF, when not nil, runs instead of
// the command's own run.
func NewCmdCommit(f *cmdutil.Factory, runF func(context.Context, *endOptions) error) *cobra.Command {
	opts := &endOptions{Connect: f.Connect, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "commit RESERVATION [AMOUNT]",
		Short: "Keep a reservation's units (all, or AMOUNT) until its window ends; capture an authorization",
		Long: `Keep AMOUNT of a reservation's units (default all of them): they stay counted
until the reservation's window ends, one window after it was made, and the
rest comes back at once. For an authorization, capture AMOUNT: it moves to the
payee, and the rest of the money and of the limit comes back.

A commit retried with the same AMOUNT is applied once; one after a cancel, or
with another AMOUNT, is an error, and so is one after the reservation expired.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if opts.Reservation, err = reservationArg(args[0]); err != nil {
				return err
			}
			if len(args) == 2 {
				if opts.Amount, err = cmdutil.ParseAmount(args[1]); err != nil {
					return cmdutil.Usagef("AMOUNT %w", err)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return endRun(cmd.Context(), opts, true)
		},
	}
	return cmd
}

// NewCmdCancel returns tblimit cancel; runF, when not nil, runs instead of
// the command's own run.
func NewCmdCancel(f *cmdutil.Factory, runF func(context.Context, *endOptions) error) *cobra.Command {
	opts := &endOptions{Connect: f.Connect, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "cancel RESERVATION",
		Short: "Give a reservation's units back now; release an authorization",
		Long: `Give all of a reservation's units back at once (for an authorization: release
the money and the limit). Cancelling twice, or after the reservation expired,
is not an error; cancelling after a commit is: the commit stands.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if opts.Reservation, err = reservationArg(args[0]); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return endRun(cmd.Context(), opts, false)
		},
	}
	return cmd
}

func reservationArg(s string) (ledger.ID, error) {
	id, err := ledger.ParseID(s)
	if err != nil || id.IsZero() {
		return ledger.ID{}, cmdutil.Usagef("RESERVATION %q: want the ID tblimit reserve printed (1 to 32 hex digits)", s)
	}
	return id, nil
}

func endRun(ctx context.Context, opts *endOptions, commit bool) error {
	out := EndJSON{Reservation: opts.Reservation.String(), Ended: "cancelled"}
	err := cmdutil.WithLedger(ctx, opts.Connect, func(c *ledger.Client) error {
		rv, err := c.Reservation(ctx, opts.Reservation)
		if err != nil {
			return err
		}
		out.Resource = rv.Resource().Name
		switch {
		case !commit:
			return rv.Cancel(ctx)
		case opts.Amount == 0:
			out.Ended = "committed"
			return rv.Commit(ctx)
		default:
			out.Ended, out.Amount = "committed", opts.Amount
			return rv.CommitN(ctx, opts.Amount)
		}
	})
	if err != nil {
		return err
	}
	p := opts.Printer()
	return p.Emit(out, func() {
		if out.Amount != 0 {
			p.Printf("%s %d of reservation %s on %s\n", out.Ended, out.Amount, out.Reservation, out.Resource)
			return
		}
		p.Printf("%s reservation %s on %s\n", out.Ended, out.Reservation, out.Resource)
	})
}
