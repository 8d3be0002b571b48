package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
)

// requestFlags are the flags of a request (acquire, pay): an attempt ID and
// a reference.
type requestFlags struct {
	id  string
	ref uint64
}

func (f *requestFlags) bind(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&f.id, "id", "", "the attempt's ID (32 hex digits), to retry "+what+" whose answer was lost without counting it twice")
	cmd.Flags().Uint64Var(&f.ref, "ref", 0, "a number stored with the transfer for the audit trail")
}

// parse reads the flags: the attempt's ID (zero for a new attempt) and its
// reference.
func (f *requestFlags) parse() (ledger.ID, uint64, error) {
	id, err := parseID(f.id)
	return id, f.ref, err
}

// emitDecision prints a decision, as JSON or as text, and turns a denial into
// the denied exit status.
func emitDecision(p *printer, out any, d ledger.Decision, text func()) error {
	if err := p.emit(out, text); err != nil {
		return err
	}
	if !d.Allowed {
		return denied
	}
	return nil
}

// parseID parses an --id flag: "" is the zero ID (a new attempt).
func parseID(s string) (ledger.ID, error) {
	if s == "" {
		return ledger.ID{}, nil
	}
	id, err := ledger.ParseID(s)
	if err != nil || id.IsZero() {
		return ledger.ID{}, usagef("--id %q: want 1 to 32 hex digits, not all zero", s)
	}
	return id, nil
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
