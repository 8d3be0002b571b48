package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
)

// requestFlags are the flags of a request: an attempt ID and a reference.
type requestFlags struct {
	id  string
	ref uint64
}

func (f *requestFlags) bind(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&f.id, "id", "", "the attempt's ID (32 hex digits), to retry "+what+" whose answer was lost without counting it twice")
	cmd.Flags().Uint64Var(&f.ref, "ref", 0, "a number stored with the transfer for the audit trail")
}

func (f *requestFlags) parse() (ledger.ID, error) {
	if f.id == "" {
		return ledger.ID{}, nil
	}
	id, err := ledger.ParseID(f.id)
	if err != nil || id.IsZero() {
		return ledger.ID{}, usagef("--id %q: want 1 to 32 hex digits, not all zero", f.id)
	}
	return id, nil
}

// denied ends a command whose request a limit denied: exit code 3, and no
// error message (the decision was printed).
var denied = &exitError{code: ExitDenied}

// retryable adds to an error whose answer was lost how to retry the attempt.
func retryable(err error) error {
	if id, ok := ledger.AttemptID(err); ok {
		return fmt.Errorf("%w; it may still have been applied: retry with --id %s to make sure it counts once", err, id)
	}
	return err
}

// usedID explains an ID given again for a different request.
func usedID(err error) error {
	if errors.Is(err, ledger.ErrInvalidID) {
		return errors.New("--id was already used for a different request")
	}
	return err
}

type acquireOptions struct {
	g   *globalOptions
	req requestFlags
}

func newAcquire(g *globalOptions) *cobra.Command {
	o := &acquireOptions{g: g}
	cmd := &cobra.Command{
		Use:   "acquire RESOURCE USER [AMOUNT]",
		Short: "Take units of a resource for a user (exit 3 when a limit denies)",
		Long: `Take AMOUNT units (default 1: one request; for bandwidth the size in bytes) of a
resource for a user. The units return by themselves one window later.

Exits 0 when admitted and 3 when the limit denies (nothing is taken); the
output says how many units remain and, when denied, when to retry.`,
		Args:              args(cobra.RangeArgs(2, 3)),
		ValidArgsFunction: completeResources(g),
		RunE: func(cmd *cobra.Command, a []string) error {
			return o.run(cmd.Context(), a)
		},
	}
	o.req.bind(cmd, "an acquire")
	return cmd
}

func (o *acquireOptions) run(ctx context.Context, a []string) error {
	user := a[1]
	if err := checkKey(user); err != nil {
		return usagef("USER: %w", err)
	}
	amount := uint64(1)
	if len(a) == 3 {
		var err error
		if amount, err = parseAmount(a[2]); err != nil {
			return usagef("AMOUNT %w", err)
		}
	}
	id, err := o.req.parse()
	if err != nil {
		return err
	}
	var d ledger.Decision
	var r ledger.Resource
	err = o.g.run(ctx, func(c *ledger.Client) (err error) {
		if r, err = resolve(ctx, c, a[0]); err != nil {
			return err
		}
		if r.Kind == ledger.Money {
			return fmt.Errorf("%s is a money resource: use tblimit pay", r.Name)
		}
		if !r.Lazy {
			// Check first, so that an unknown user writes nothing at all.
			if _, err := c.Inspect(ctx, r, user); err != nil {
				return err
			}
		}
		d, err = c.Acquire(ctx, r, ledger.Request{User: user, Amount: amount, ID: id, Ref: o.req.ref})
		return usedID(retryable(err))
	})
	if err != nil {
		return err
	}
	out := decisionOut(r, amount, d)
	out.User = user
	p := o.g.out()
	if err := p.emit(out, func() { printDecision(p, fmt.Sprintf("%d of %s for %q", amount, r.Name, user), d) }); err != nil {
		return err
	}
	if !d.Allowed {
		return denied
	}
	return nil
}

// printDecision prints a decision as one line.
func printDecision(p *printer, what string, d ledger.Decision) {
	if d.Allowed {
		mark := ""
		if p.tty {
			mark = "✔ "
		}
		p.printf("%s: %s; %d of %d left, all back in %s\n", p.paint(green, mark+"admitted"), what, d.Remaining, d.Limit, human(d.ResetAfter))
		return
	}
	mark := ""
	if p.tty {
		mark = "✘ "
	}
	verdict := "denied (" + d.Reason.String() + ")"
	when := ""
	switch {
	case d.Reason == ledger.InsufficientFunds:
		when = "; not enough funds: nothing was paid"
	case d.RetryAfter < 0:
		when = fmt.Sprintf("; more than the whole limit of %d: never admitted", d.Limit)
	default:
		when = fmt.Sprintf("; %d of %d left, retry after %s", d.Remaining, d.Limit, human(d.RetryAfter))
	}
	p.printf("%s: %s%s\n", p.paint(red, mark+verdict), what, when)
}

type payOptions struct {
	g   *globalOptions
	req requestFlags
}

func newPay(g *globalOptions) *cobra.Command {
	o := &payOptions{g: g}
	cmd := &cobra.Command{
		Use:   "pay RESOURCE FROM TO AMOUNT",
		Short: "Pay under a money limit (exit 3 when the limit or the funds deny)",
		Long: `Pay AMOUNT (in the currency's smallest unit) from one user to another under a
money resource's limit: a reservation on the limit ledger linked to the payment
on the currency ledger, so that both happen or neither does.

Both users need an account on the currency ledger (tblimit users add), and
FROM the funds (tblimit fund). Exits 0 when paid and 3 when denied, by the
limit or for lack of funds: then nothing at all moved.`,
		Args:              args(cobra.ExactArgs(4)),
		ValidArgsFunction: completeResources(g),
		RunE: func(cmd *cobra.Command, a []string) error {
			return o.run(cmd.Context(), a)
		},
	}
	o.req.bind(cmd, "a payment")
	return cmd
}

func (o *payOptions) run(ctx context.Context, a []string) error {
	from, to := a[1], a[2]
	if err := checkKey(from); err != nil {
		return usagef("FROM: %w", err)
	}
	if err := checkKey(to); err != nil {
		return usagef("TO: %w", err)
	}
	if from == to {
		return usagef("FROM and TO are both %q: a user cannot pay itself", from)
	}
	amount, err := parseAmount(a[3])
	if err != nil {
		return usagef("AMOUNT %w", err)
	}
	id, err := o.req.parse()
	if err != nil {
		return err
	}
	var d ledger.Decision
	var r ledger.Resource
	var funds uint64
	err = o.g.run(ctx, func(c *ledger.Client) (err error) {
		if r, err = resolve(ctx, c, a[0]); err != nil {
			return err
		}
		if r.Kind != ledger.Money {
			return fmt.Errorf("%s is a %s resource, not money: use tblimit acquire", r.Name, r.Kind)
		}
		// Check first, so that an unknown user writes nothing at all.
		if _, err := c.Inspect(ctx, r, from); err != nil {
			return err
		}
		for _, u := range []string{from, to} {
			if _, err := c.Funds(ctx, r.Currency, u); err != nil {
				return fmt.Errorf("%w (tblimit users add %s %s opens it)", err, r.Name, u)
			}
		}
		d, err = c.Pay(ctx, r, ledger.Payment{From: from, To: to, Amount: amount, ID: id, Ref: o.req.ref})
		if err != nil {
			return usedID(retryable(err))
		}
		funds, err = c.Funds(ctx, r.Currency, from)
		return err
	})
	if err != nil {
		return err
	}
	out := decisionOut(r, amount, d)
	out.From, out.To, out.Funds = from, to, &funds
	p := o.g.out()
	err = p.emit(out, func() {
		printDecision(p, fmt.Sprintf("pay %d from %q to %q on %s", amount, from, to, r.Name), d)
		p.printf("%q holds %d\n", from, funds)
	})
	if err != nil {
		return err
	}
	if !d.Allowed {
		return denied
	}
	return nil
}

type fundOptions struct {
	g  *globalOptions
	id string
}

func newFund(g *globalOptions) *cobra.Command {
	o := &fundOptions{g: g}
	cmd := &cobra.Command{
		Use:   "fund RESOURCE USER AMOUNT [--id ID]",
		Short: "Credit a user's currency account from the currency's operator",
		Long: `Credit AMOUNT (in the currency's smallest unit) to a user's account on a money
resource's currency ledger, from the currency ledger's operator account. The
user needs that account (tblimit users add RESOURCE USER).

Give --id to make a retry safe: funding again with the same ID and amount is
not applied twice. The output includes the ID used.`,
		Args:              args(cobra.ExactArgs(3)),
		ValidArgsFunction: completeResources(g),
		RunE: func(cmd *cobra.Command, a []string) error {
			return o.run(cmd.Context(), a)
		},
	}
	cmd.Flags().StringVar(&o.id, "id", "", "the transfer's ID (32 hex digits), for a safe retry (default: a new one)")
	return cmd
}

func (o *fundOptions) run(ctx context.Context, a []string) error {
	user := a[1]
	if err := checkKey(user); err != nil {
		return usagef("USER: %w", err)
	}
	amount, err := parseAmount(a[2])
	if err != nil {
		return usagef("AMOUNT %w", err)
	}
	id := ledger.NewID()
	if o.id != "" {
		if id, err = ledger.ParseID(o.id); err != nil || id.IsZero() {
			return usagef("--id %q: want 1 to 32 hex digits, not all zero", o.id)
		}
	}
	out := fundJSON{User: user, Amount: amount, ID: id.String()}
	err = o.g.run(ctx, func(c *ledger.Client) error {
		r, err := resolve(ctx, c, a[0])
		if err != nil {
			return err
		}
		if r.Kind != ledger.Money {
			return fmt.Errorf("%s is a %s resource: only money resources have funds", r.Name, r.Kind)
		}
		out.Resource, out.CurrencyLedger = r.Name, r.Currency
		if _, err := c.Funds(ctx, r.Currency, user); err != nil {
			return fmt.Errorf("%w (add the user first: tblimit users add %s %s)", err, r.Name, user)
		}
		if err := c.Fund(ctx, r.Currency, ledger.Request{User: user, Amount: amount, ID: id}); err != nil {
			if errors.Is(err, ledger.ErrUnknownUser) {
				return fmt.Errorf("%w (add the user first: tblimit users add %s %s)", err, r.Name, user)
			}
			return usedID(retryable(err))
		}
		out.Funds, err = c.Funds(ctx, r.Currency, user)
		return err
	})
	if err != nil {
		return err
	}
	p := o.g.out()
	return p.emit(out, func() {
		p.printf("funded %q with %d on currency ledger %d (id %s); %q holds %d\n", user, amount, out.CurrencyLedger, out.ID, user, out.Funds)
	})
}

type usageOptions struct {
	g   *globalOptions
	max int
}

func newUsage(g *globalOptions) *cobra.Command {
	o := &usageOptions{g: g}
	cmd := &cobra.Command{
		Use:               "usage RESOURCE USER",
		Short:             "List a user's units in flight and when each returns",
		Args:              args(cobra.ExactArgs(2)),
		ValidArgsFunction: completeResources(g),
		RunE: func(cmd *cobra.Command, a []string) error {
			return o.run(cmd.Context(), a)
		},
	}
	cmd.Flags().IntVar(&o.max, "max", 100, "list at most this many reservations, those that return first (0: all)")
	return cmd
}

func (o *usageOptions) run(ctx context.Context, a []string) error {
	user := a[1]
	if err := checkKey(user); err != nil {
		return usagef("USER: %w", err)
	}
	if o.max < 0 {
		return usagef("--max %d: must not be negative", o.max)
	}
	out := usageJSON{User: user, Reservations: []reservationJSON{}}
	var now time.Time
	err := o.g.run(ctx, func(c *ledger.Client) error {
		r, err := resolve(ctx, c, a[0])
		if err != nil {
			return err
		}
		out.Resource = r.Name
		u, err := c.Inspect(ctx, r, user)
		if err != nil {
			return err
		}
		out.Limit, out.InFlight, out.Available = u.Limit, u.InFlight, u.Available
		flights, err := c.Flights(ctx, r, user, o.max)
		if err != nil {
			return err
		}
		now = nowIn(ctx)
		for _, f := range flights {
			out.Reservations = append(out.Reservations, reservationJSON{
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
	p := o.g.out()
	return p.emit(out, func() {
		if p.tty || len(out.Reservations) == 0 {
			p.printf("%q on %s: limit %d, %d in flight, %d available\n", user, out.Resource, out.Limit, out.InFlight, out.Available)
		}
		rows := make([][]string, len(out.Reservations))
		for i, r := range out.Reservations {
			rows[i] = []string{r.ID, u64(r.Amount), r.Taken, r.Returns, human(secondsDuration(r.ReturnsInSeconds)), strconv.FormatUint(r.Ref, 10)}
		}
		if len(rows) > 0 {
			p.table([]string{"ID", "AMOUNT", "TAKEN", "RETURNS", "RETURNS IN", "REF"}, rows)
		}
	})
}
