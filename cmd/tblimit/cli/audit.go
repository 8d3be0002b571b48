package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
)

type auditOptions struct {
	Connect connectFunc
	Printer func() *printer
	ErrOut  io.Writer // notices: users that could not be audited
	Now     func() time.Time

	Resource string
	User     string // "": every user of the resource
	Since    *when  // nil: from the first hold
	Until    *when  // nil: until now
}

func newCmdAudit(f *factory, runF func(context.Context, *auditOptions) error) *cobra.Command {
	opts := &auditOptions{Connect: f.connect, Printer: f.printer, ErrOut: f.errOut, Now: f.now}
	var span spanFlags
	cmd := &cobra.Command{
		Use:   "audit RESOURCE [USER] [--since D|TIME] [--until D|TIME]",
		Short: "Check what the cluster recorded against the limits (exit 4 when a user was over)",
		Long: `Check, from what the cluster recorded, that no user of a resource was admitted
more than its limit in any interval of one window, nor held more than its
limit in flight at any instant: one user, or every user of the resource. It
reads every hold in the span (all of them by default), whichever process took
it, so it checks a production ledger as well as a test.

The limit checked against is each user's limit now: a limit changed within the
span makes the check stricter or looser than the limit of the time. Units
given back early (committed, cancelled) count in flight until then, not in the
window. Leases (ledger.WithLeases) admit by design up to a lease more than the
limit in a window; their give-backs hold units again from the moment they are
given back, which the window check counts as new.

Exits 0 when every user was within its limit and 4 when one was over (the
table says who and where). Users whose keys are longer than 16 bytes are not
stored with their accounts: they are named on stderr and audited only by key.`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: f.completeResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if len(args) == 2 {
				if opts.User, err = keyArg("USER", args[1]); err != nil {
					return err
				}
			}
			if opts.Since, opts.Until, err = span.parse(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return auditRun(cmd.Context(), opts)
		},
	}
	span.bind(cmd, "check holds")
	return cmd
}

// overLimit ends an audit that found a user over its limit: exit 4, and
// no error message (the audit was printed).
var overLimit = &silentError{code: ExitOverLimit}

func auditRun(ctx context.Context, opts *auditOptions) error {
	now := opts.Now()
	since, until := opts.Since.time(now), opts.Until.time(now)
	out := auditJSON{Since: rfc3339(since), Until: rfc3339(until), OK: true, Users: []auditUserJSON{}, Unaudited: []string{}}
	err := withResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, r ledger.Resource) error {
		out.Resource = r.Name
		keys := []string{opts.User}
		if opts.User == "" {
			var err error
			if keys, out.Unaudited, err = auditKeys(ctx, c, r); err != nil {
				return err
			}
		}
		for _, key := range keys {
			a, err := c.Audit(ctx, r, key, since, until)
			if err != nil {
				return fmt.Errorf("audit of %q: %w", key, err)
			}
			out.Users = append(out.Users, auditUserOut(key, a))
			out.OK = out.OK && a.OK()
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n := len(out.Unaudited); n > 0 {
		fmt.Fprintf(opts.ErrOut, "tblimit: notice: %s of %s not audited: their keys are not stored (longer than 16 bytes); audit each by key: %v\n",
			plural(n, "user"), out.Resource, out.Unaudited)
	}
	p := opts.Printer()
	if err := p.emit(out, func() { printAudit(p, out) }); err != nil {
		return err
	}
	if !out.OK {
		return overLimit
	}
	return nil
}

// auditKeys lists the keys of r's users, and the accounts of those whose
// keys are not stored.
func auditKeys(ctx context.Context, c *ledger.Client, r ledger.Resource) (keys, unaudited []string, err error) {
	users, err := c.Users(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	unaudited = []string{}
	for _, u := range users {
		if _, err := ledger.NormalizeKey(u.Key); err != nil {
			unaudited = append(unaudited, u.ID.String()) // not stored, or stored before the key rule
			continue
		}
		keys = append(keys, u.Key)
	}
	return keys, unaudited, nil
}

func printAudit(p *printer, out auditJSON) {
	if p.tty || len(out.Users) == 0 {
		over := 0
		for _, u := range out.Users {
			if !u.OK {
				over++
			}
		}
		verdict := p.paint(green, "all within their limits")
		if over > 0 {
			verdict = p.paint(red, fmt.Sprintf("%d over", over))
		}
		p.printf("audit of %s: %s, %s\n", out.Resource, plural(len(out.Users), "user"), verdict)
	}
	rows := make([][]string, len(out.Users))
	for i, u := range out.Users {
		verdict := "ok"
		if !u.OK {
			verdict = fmt.Sprintf("OVER in %s", plural(len(u.Over), "window"))
		}
		rows[i] = []string{displayKey(u.User), u64(u.Limit), u64(u.MostInWindow), u.WindowStart, u64(u.MostInFlight),
			strconv.Itoa(u.Holds), u64(u.Units), strconv.Itoa(u.Ended), verdict}
	}
	if len(rows) > 0 {
		p.table([]string{"USER", "LIMIT", "MOST IN WINDOW", "WINDOW START", "MOST IN FLIGHT", "HOLDS", "UNITS", "ENDED", "RESULT"}, rows)
	}
}

// auditJSON is the answer to audit.
type auditJSON struct {
	Resource  string          `json:"resource"`
	Since     string          `json:"since"` // "" when from the first hold
	Until     string          `json:"until"` // "" when until now
	OK        bool            `json:"ok"`    // every user audited was within its limit
	Users     []auditUserJSON `json:"users"`
	Unaudited []string        `json:"unaudited"` // accounts of users whose keys are not stored
}

type auditUserJSON struct {
	User         string   `json:"user"`
	OK           bool     `json:"ok"`
	Limit        uint64   `json:"limit"` // the user's limit now
	Holds        int      `json:"holds"`
	Units        uint64   `json:"units"`
	Ended        int      `json:"ended"` // holds committed or cancelled before they expired
	MostInWindow uint64   `json:"most_in_window"`
	WindowStart  string   `json:"window_start"` // where the first such window starts; "" without holds
	MostInFlight uint64   `json:"most_in_flight"`
	Over         []string `json:"over"` // starts of windows over the limit (at most 100)
}

func auditUserOut(key string, a ledger.Audit) auditUserJSON {
	out := auditUserJSON{User: key, OK: a.OK(), Limit: a.Limit, Holds: a.Holds, Units: a.Units, Ended: a.Ended,
		MostInWindow: a.MostInWindow, MostInFlight: a.MostInFlight, WindowStart: rfc3339(a.WindowStart), Over: []string{}}
	if a.MostInWindow == 0 {
		out.WindowStart = ""
	}
	for _, t := range a.Over {
		out.Over = append(out.Over, rfc3339(t))
	}
	return out
}
