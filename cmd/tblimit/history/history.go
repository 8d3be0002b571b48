// Package history is tblimit history: a user's admissions and how each ended.
package history

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

type historyOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer
	Now     func() time.Time

	Resource string
	User     string
	Since    *cmdutil.When // nil: from the first admission
	Until    *cmdutil.When // nil: until now
	Max      int           // at most this many admissions, the newest; 0: all
}

// NewCmdHistory returns tblimit history; runF, when not nil, runs instead of
// historyRun.
func NewCmdHistory(f *cmdutil.Factory, runF func(context.Context, *historyOptions) error) *cobra.Command {
	opts := &historyOptions{Connect: f.Connect, Printer: f.Printer, Now: f.Now}
	var span cmdutil.SpanFlags
	cmd := &cobra.Command{
		Use:   "history RESOURCE USER [--since D|TIME] [--until D|TIME] [--max N]",
		Short: "List a user's admissions, the newest first, and how each ended",
		Long: `List what a user was admitted on a resource, as the cluster recorded it: each
admission's time, amount, ref and ID (the request's name, as acquire and pay
print it), and how it ended: expired (its units returned one window later),
committed (ended by tblimit commit, which keeps what it committed until the
window ends, shown as "kept"), cancelled (given back early; a lease giving
back what it did not use keeps the units it handed out, also shown as
"kept"), or in flight. For a money resource each admission shows its payment.

--since and --until take a time (2026-01-02T15:04:05Z, or a date: 2026-01-02,
midnight UTC) or how long ago (90m, 2d, 1d12h).`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if opts.User, err = cmdutil.KeyArg("USER", args[1]); err != nil {
				return err
			}
			if opts.Since, opts.Until, err = span.Parse(); err != nil {
				return err
			}
			if opts.Max < 0 {
				return cmdutil.Usagef("--max %d: must not be negative", opts.Max)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return historyRun(cmd.Context(), opts)
		},
	}
	span.Bind(cmd, "admissions")
	cmd.Flags().IntVar(&opts.Max, "max", 100, "list at most this many admissions, the newest (0: all)")
	return cmd
}

func historyRun(ctx context.Context, opts *historyOptions) error {
	now := opts.Now()
	since, until := opts.Since.Time(now), opts.Until.Time(now)
	out := JSON{User: opts.User, Since: cmdutil.RFC3339(since), Until: cmdutil.RFC3339(until), Admissions: []admissionJSON{}}
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, r ledger.Resource) error {
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
	return p.Emit(out, func() { printHistory(p, out) })
}

func printHistory(p *cmdutil.Printer, out JSON) {
	if p.TTY { // for scripts: rows only, none for an empty history
		p.Printf("%q on %s: %s, the newest first\n", out.User, out.Resource, cmdutil.Plural(len(out.Admissions), "admission"))
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
			paid = fmt.Sprintf("%d to %s", pay.Amount, cmdutil.DisplayKey(to))
		}
		rows[i] = []string{a.Taken, a.ID, cmdutil.U64(a.Amount), cmdutil.U64(a.Ref), end, a.Ended, paid}
	}
	if len(rows) > 0 {
		p.Table([]string{"TAKEN", "ID", "AMOUNT", "REF", "END", "ENDED", "PAID"}, rows)
	}
	if out.More && p.TTY {
		p.Printf("(more: --max 0 lists all, --until %s those before)\n", out.Admissions[len(out.Admissions)-1].Taken)
	}
}

// JSON is the answer to history.
type JSON struct {
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
		Taken:  cmdutil.RFC3339(a.Taken),
		Amount: a.Amount,
		Ref:    a.Ref,
		End:    endName(a.End),
		Ended:  cmdutil.RFC3339(a.Ended),
	}
	if k := a.Kept; k != nil {
		out.Kept = &keptJSON{Hold: k.Hold.String(), Amount: k.Amount, End: endName(k.End), Ended: cmdutil.RFC3339(k.Ended)}
	}
	if p := a.Payment; p != nil {
		out.Payment = &paymentJSON{ID: p.ID.String(), To: p.ToKey, ToAccount: p.To.String(), Amount: p.Amount, Time: cmdutil.RFC3339(p.Time)}
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
