// Package audit is tblimit audit: what the cluster recorded, checked against the limits.
package audit

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

type auditOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer
	ErrOut  io.Writer // notices: users that could not be audited
	Now     func() time.Time

	Resource string
	User     string        // "": every user of the resource
	Since    *cmdutil.When // nil: from the first hold
	Until    *cmdutil.When // nil: until now
}

// NewCmdAudit returns tblimit audit; runF, when not nil, runs instead of auditRun.
func NewCmdAudit(f *cmdutil.Factory, runF func(context.Context, *auditOptions) error) *cobra.Command {
	opts := &auditOptions{Connect: f.Connect, Printer: f.Printer, ErrOut: f.ErrOut, Now: f.Now}
	var span cmdutil.SpanFlags
	cmd := &cobra.Command{
		Use:   "audit RESOURCE [USER] [--since D|TIME] [--until D|TIME]",
		Short: "Check what the cluster recorded against the limits (exit 4 when a user was over)",
		Long: `Check, from what the cluster recorded, that no user of a resource was admitted
more than its limit in any interval of one window, nor held more than its
limit in flight at any instant: one user, or every user of the resource. It
reads every hold in the span (all of them by default), whichever process took
it, so it checks a production ledger as well as a test.

Each interval is checked against the limit of its time (the largest it was
within the interval, when the limit was raised or lowered in it). Units
given back early (committed, cancelled, reset) count in flight until then,
not in the window. A lease's give-back (ledger.WithLeases) counts as the
lease, from when it was taken; leases admit by design up to a lease more
than the limit in a window.

Exits 0 when every user was within its limit and 4 when one was over (the
table says who and where). A user provisioned with a long key by an older
tblimit, which did not keep it, is listed by its account.`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if len(args) == 2 {
				if opts.User, err = cmdutil.KeyArg("USER", args[1]); err != nil {
					return err
				}
			}
			if opts.Since, opts.Until, err = span.Parse(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return auditRun(cmd.Context(), opts)
		},
	}
	span.Bind(cmd, "check holds")
	return cmd
}

// overLimit ends an audit that found a user over its limit: exit 4, and
// no error message (the audit was printed).
var overLimit = &cmdutil.SilentError{Code: cmdutil.ExitOverLimit}

func auditRun(ctx context.Context, opts *auditOptions) error {
	now := opts.Now()
	since, until := opts.Since.Time(now), opts.Until.Time(now)
	out := JSON{Since: cmdutil.RFC3339(since), Until: cmdutil.RFC3339(until), OK: true, Users: []auditUserJSON{}, Unaudited: []string{}}
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, r ledger.Resource) error {
		out.Resource = r.Name
		if opts.User != "" {
			a, err := c.Audit(ctx, r, opts.User, since, until)
			if err != nil {
				return fmt.Errorf("audit of %q: %w", opts.User, err)
			}
			out.Users = append(out.Users, auditUserOut(opts.User, ledger.UserID(r.Ledger, opts.User), a))
			out.OK = a.OK()
			return nil
		}
		users, err := c.Users(ctx, r)
		if err != nil {
			return err
		}
		for _, u := range users { // by account: a user whose key is not stored is audited too
			a, err := c.AuditAccount(ctx, r, u.ID, since, until)
			if err != nil {
				return fmt.Errorf("audit of %s: %w", u.ID, err)
			}
			out.Users = append(out.Users, auditUserOut(u.Key, u.ID, a))
			out.OK = out.OK && a.OK()
		}
		return nil
	})
	if err != nil {
		return err
	}
	p := opts.Printer()
	if err := p.Emit(out, func() { printAudit(p, out) }); err != nil {
		return err
	}
	if !out.OK {
		return overLimit
	}
	return nil
}

func printAudit(p *cmdutil.Printer, out JSON) {
	if p.TTY || len(out.Users) == 0 {
		over := 0
		for _, u := range out.Users {
			if !u.OK {
				over++
			}
		}
		verdict := p.Paint(cmdutil.Green, "all within their limits")
		if over > 0 {
			verdict = p.Paint(cmdutil.Red, fmt.Sprintf("%d over", over))
		}
		p.Printf("audit of %s: %s, %s\n", out.Resource, cmdutil.Plural(len(out.Users), "user"), verdict)
	}
	rows := make([][]string, len(out.Users))
	for i, u := range out.Users {
		verdict := "ok"
		if !u.OK {
			verdict = fmt.Sprintf("OVER in %s", cmdutil.Plural(len(u.Over), "window"))
		}
		user := cmdutil.DisplayKey(u.User)
		if u.User == "" {
			user = u.ID // a key that is not stored
		}
		rows[i] = []string{user, cmdutil.U64(u.Limit), cmdutil.U64(u.MostInWindow), u.WindowStart, cmdutil.U64(u.MostInFlight),
			strconv.Itoa(u.Holds), cmdutil.U64(u.Units), strconv.Itoa(u.Ended), verdict}
	}
	if len(rows) > 0 {
		p.Table([]string{"USER", "LIMIT", "MOST IN WINDOW", "WINDOW START", "MOST IN FLIGHT", "HOLDS", "UNITS", "ENDED", "RESULT"}, rows)
	}
}

// JSON is the answer to audit.
type JSON struct {
	Resource  string          `json:"resource"`
	Since     string          `json:"since"` // "" when from the first hold
	Until     string          `json:"until"` // "" when until now
	OK        bool            `json:"ok"`    // every user audited was within its limit
	Users     []auditUserJSON `json:"users"`
	Unaudited []string        `json:"unaudited"` // kept for compatibility: every user is audited now, by its account
}

type auditUserJSON struct {
	User         string   `json:"user"` // "" for a long key provisioned before keys were kept
	ID           string   `json:"id"`   // the user's account
	OK           bool     `json:"ok"`
	Limit        uint64   `json:"limit"` // the user's limit now
	LimitMin     uint64   `json:"limit_min"`
	LimitMax     uint64   `json:"limit_max"` // the least and most it was within the span
	InFlightOver bool     `json:"in_flight_over"`
	Holds        int      `json:"holds"`
	Units        uint64   `json:"units"`
	Ended        int      `json:"ended"` // holds committed or cancelled before they expired
	MostInWindow uint64   `json:"most_in_window"`
	WindowStart  string   `json:"window_start"` // where the first such window starts; "" without holds
	MostInFlight uint64   `json:"most_in_flight"`
	Over         []string `json:"over"` // starts of windows over the limit (at most 100)
}

func auditUserOut(key string, id ledger.ID, a ledger.Audit) auditUserJSON {
	out := auditUserJSON{User: key, ID: id.String(), OK: a.OK(), Limit: a.Limit, LimitMin: a.LimitMin, LimitMax: a.LimitMax,
		InFlightOver: a.InFlightOver, Holds: a.Holds, Units: a.Units, Ended: a.Ended,
		MostInWindow: a.MostInWindow, MostInFlight: a.MostInFlight, WindowStart: cmdutil.RFC3339(a.WindowStart), Over: []string{}}
	if a.MostInWindow == 0 {
		out.WindowStart = ""
	}
	for _, t := range a.Over {
		out.Over = append(out.Over, cmdutil.RFC3339(t))
	}
	return out
}
