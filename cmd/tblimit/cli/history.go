package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
)

type historyOptions struct {
	Connect connectFunc
	Printer func() *printer
	Now     func() time.Time

	Resource string
	User     string
	Since    *when // nil: from the first admission
	Until    *when // nil: until now
	Max      int   // at most this many admissions, the newest; 0: all
}

func newCmdHistory(f *factory, runF func(context.Context, *historyOptions) error) *cobra.Command {
	opts := &historyOptions{Connect: f.connect, Printer: f.printer, Now: f.now}
	var span spanFlags
	cmd := &cobra.Command{
		Use:   "history RESOURCE USER [--since D|TIME] [--until D|TIME] [--max N]",
		Short: "List a user's admissions, the newest first, and how each ended",
		Long: `List what a user was admitted on a resource, as the cluster recorded it: each
admission's time, amount, ref and ID (the request's name, as acquire and pay
print it), and how it ended: expired (its units returned one window later),
committed (kept for good), cancelled (given back early; a lease giving back
what it did not use keeps the units it handed out, shown as "kept"), or in
flight. For a money resource each admission shows its payment.

--since and --until take a time (2026-01-02T15:04:05Z, or a date: 2026-01-02,
midnight UTC) or how long ago (90m, 2d, 1d12h).`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: f.completeResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if opts.User, err = keyArg("USER", args[1]); err != nil {
				return err
			}
			if opts.Since, opts.Until, err = span.parse(); err != nil {
				return err
			}
			if opts.Max < 0 {
				return usagef("--max %d: must not be negative", opts.Max)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return historyRun(cmd.Context(), opts)
		},
	}
	span.bind(cmd, "admissions")
	cmd.Flags().IntVar(&opts.Max, "max", 100, "list at most this many admissions, the newest (0: all)")
	return cmd
}

func historyRun(ctx context.Context, opts *historyOptions) error {
	now := opts.Now()
	since, until := opts.Since.time(now), opts.Until.time(now)
	out := historyJSON{User: opts.User, Since: rfc3339(since), Until: rfc3339(until), Admissions: []admissionJSON{}}
	err := withResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, r ledger.Resource) error {
		out.Resource = r.Name
		max := opts.Max
		if max > 0 {
			max++ // one more tells whether there are more
		}
		h, err := c.History(ctx, r, opts.User, since, until, max)
		if err != nil {
			return err
		}
		if opts.Max > 0 && len(h) > opts.Max {
			h, out.More = h[:opts.Max], true
		}
		for _, a := range h {
			out.Admissions = append(out.Admissions, admissionOut(a))
		}
		return nil
	})
	if err != nil {
		return err
	}
	p := opts.Printer()
	return p.emit(out, func() { printHistory(p, out) })
}

func printHistory(p *printer, out historyJSON) {
	if p.tty { // for scripts: rows only, none for an empty history
		p.printf("%q on %s: %s, the newest first\n", out.User, out.Resource, plural(len(out.Admissions), "admission"))
	}
	rows := make([][]string, len(out.Admissions))
	for i, a := range out.Admissions {
		end := strings.ReplaceAll(a.End, "_", " ")
		if a.Kept != nil {
			end += fmt.Sprintf(" (%d kept: %s)", a.Kept.Amount, strings.ReplaceAll(a.Kept.End, "_", " "))
		}
		paid := ""
		if pay := a.Payment; pay != nil {
			to := pay.To
			if to == "" {
				to = "account " + pay.ToAccount
			}
			paid = fmt.Sprintf("%d to %s", pay.Amount, displayKey(to))
		}
		rows[i] = []string{a.Taken, a.ID, u64(a.Amount), u64(a.Ref), end, a.Ended, paid}
	}
	if len(rows) > 0 {
		p.table([]string{"TAKEN", "ID", "AMOUNT", "REF", "END", "ENDED", "PAID"}, rows)
	}
	if out.More && p.tty {
		p.printf("(more: --max 0 lists all, --until %s those before)\n", out.Admissions[len(out.Admissions)-1].Taken)
	}
}

// historyJSON is the answer to history.
type historyJSON struct {
	Resource   string          `json:"resource"`
	User       string          `json:"user"`
	Since      string          `json:"since"` // "" when from the first
	Until      string          `json:"until"` // "" when until now
	Admissions []admissionJSON `json:"admissions"`
	More       bool            `json:"more"` // --max cut the list short
}

type admissionJSON struct {
	ID      string       `json:"id"`   // the request's name (as acquire and pay print it)
	Hold    string       `json:"hold"` // the transfer that took the units
	Taken   string       `json:"taken"`
	Amount  uint64       `json:"amount"`
	Ref     uint64       `json:"ref"`
	End     string       `json:"end"`   // in_flight, expired, committed or cancelled
	Ended   string       `json:"ended"` // when it expired (or will), or was committed or cancelled
	Kept    *keptJSON    `json:"kept,omitempty"`
	Payment *paymentJSON `json:"payment,omitempty"`
}

// keptJSON is the hold that kept the units a lease had handed out when it
// gave back the others.
type keptJSON struct {
	Hold   string `json:"hold"`
	Amount uint64 `json:"amount"`
	End    string `json:"end"`
	Ended  string `json:"ended"`
}

// paymentJSON is the payment made with a money resource's hold.
type paymentJSON struct {
	ID        string `json:"id"`
	To        string `json:"to"`         // the payee's key
	ToAccount string `json:"to_account"` // the payee's currency account
	Amount    uint64 `json:"amount"`
	Time      string `json:"time"`
}

func admissionOut(a ledger.Admission) admissionJSON {
	out := admissionJSON{
		ID:     a.ID.String(),
		Hold:   a.Hold.String(),
		Taken:  rfc3339(a.Taken),
		Amount: a.Amount,
		Ref:    a.Ref,
		End:    endName(a.End),
		Ended:  rfc3339(a.Ended),
	}
	if k := a.Kept; k != nil {
		out.Kept = &keptJSON{Hold: k.Hold.String(), Amount: k.Amount, End: endName(k.End), Ended: rfc3339(k.Ended)}
	}
	if p := a.Payment; p != nil {
		out.Payment = &paymentJSON{ID: p.ID.String(), To: p.ToKey, ToAccount: p.To.String(), Amount: p.Amount, Time: rfc3339(p.Time)}
	}
	return out
}

func endName(e ledger.End) string {
	switch e {
	case ledger.InFlight:
		return "in_flight"
	case ledger.Expired:
		return "expired"
	case ledger.Committed:
		return "committed"
	case ledger.Cancelled:
		return "cancelled"
	}
	return e.String()
}

// rfc3339 prints a time as the JSON does: RFC 3339 with nanoseconds in UTC;
// "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// spanFlags are --since and --until.
type spanFlags struct{ since, until string }

func (s *spanFlags) bind(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&s.since, "since", "", what+" taken at or after this time, or this long ago (2026-01-02T15:04:05Z, 2026-01-02, 90m, 1d12h)")
	cmd.Flags().StringVar(&s.until, "until", "", what+" taken at or before this time, or this long ago")
}

func (s *spanFlags) parse() (since, until *when, err error) {
	if since, err = parseWhenFlag("--since", s.since); err != nil {
		return nil, nil, err
	}
	if until, err = parseWhenFlag("--until", s.until); err != nil {
		return nil, nil, err
	}
	// Compared at a common instant: ago-durations move with it alike.
	if now := time.Now(); since != nil && until != nil && since.time(now).After(until.time(now)) {
		return nil, nil, usagef("--since %s is after --until %s: nothing could be listed", s.since, s.until)
	}
	return since, until, nil
}

func parseWhenFlag(name, s string) (*when, error) {
	if s == "" {
		return nil, nil
	}
	w, err := parseWhen(s)
	if err != nil {
		return nil, usagef("%s %w", name, err)
	}
	return &w, nil
}

// when is a point in time on the command line: a time, or how long before
// now (resolved when the command runs).
type when struct {
	At  time.Time // zero: Ago before now
	Ago time.Duration
}

// Times the ledger can name: cluster timestamps are nanoseconds since the
// Unix epoch in 63 bits.
var (
	minWhen = time.Unix(0, 1)
	maxWhen = time.Unix(0, 1<<63-1)
)

// parseWhen parses a time (RFC 3339, or a date: midnight UTC) or a
// duration back from now, which may start with days ("1d12h").
func parseWhen(s string) (when, error) {
	t := strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		at, err := time.Parse(layout, t)
		if err != nil {
			continue
		}
		if at.Before(minWhen) || at.After(maxWhen) {
			return when{}, fmt.Errorf("%q: outside the times a cluster records (%s to %s)", s, rfc3339(minWhen), rfc3339(maxWhen))
		}
		return when{At: at}, nil
	}
	d, err := parseDays(t)
	switch {
	case errors.Is(err, errTooLong) || d > ledger.MaxWindow:
		return when{}, fmt.Errorf("%q: longer ago than %s (give a time instead)", s, formatWindow(ledger.MaxWindow))
	case err != nil || d < 0:
		return when{}, fmt.Errorf("%q: want a time (2026-01-02T15:04:05Z, 2026-01-02) or how long ago (90m, 2d, 1d12h)", s)
	}
	return when{Ago: d}, nil
}

// formatWhen prints w as parseWhen reads it.
func formatWhen(w when) string {
	if !w.At.IsZero() {
		return rfc3339(w.At)
	}
	return formatWindow(w.Ago)
}

// time resolves w at now: the zero time (no bound) for nil, and a time the
// cluster can name otherwise.
func (w *when) time(now time.Time) time.Time {
	switch {
	case w == nil:
		return time.Time{}
	case !w.At.IsZero():
		return w.At
	}
	t := now.Add(-w.Ago)
	if t.Before(minWhen) || w.Ago < 0 {
		return minWhen
	}
	return t
}
