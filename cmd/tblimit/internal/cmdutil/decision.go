package cmdutil

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
)

// RequestFlags are the flags of a request (acquire, pay): an attempt ID and
// a reference.
type RequestFlags struct {
	id  string
	ref uint64
}

// Bind adds --id and --ref to cmd; what names the request in their help.
func (f *RequestFlags) Bind(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&f.id, "id", "", "the attempt's ID (32 hex digits), to retry "+what+" whose answer was lost without counting it twice")
	cmd.Flags().Uint64Var(&f.ref, "ref", 0, "a number stored with the transfer for the audit trail")
}

// Parse reads the flags: the attempt's ID (zero for a new attempt) and its
// reference.
func (f *RequestFlags) Parse() (ledger.ID, uint64, error) {
	id, err := ParseID(f.id)
	return id, f.ref, err
}

// EmitDecision prints a decision, as JSON or as text, and turns a denial into
// the denied exit status.
func EmitDecision(p *Printer, out any, d ledger.Decision, text func()) error {
	if err := p.Emit(out, text); err != nil {
		return err
	}
	if !d.Allowed {
		return Denied
	}
	return nil
}

// ParseID parses an --id flag: "" is the zero ID (a new attempt).
func ParseID(s string) (ledger.ID, error) {
	if s == "" {
		return ledger.ID{}, nil
	}
	id, err := ledger.ParseID(s)
	if err != nil || id.IsZero() {
		return ledger.ID{}, Usagef("--id %q: want 1 to 32 hex digits, not all zero", s)
	}
	return id, nil
}

// PrintDecision prints a decision as one line.
func PrintDecision(p *Printer, what string, d ledger.Decision) {
	if d.Allowed {
		mark := ""
		if p.TTY {
			mark = "✔ "
		}
		p.Printf("%s: %s; %d of %d left, all back in %s\n", p.Paint(Green, mark+"admitted"), what, d.Remaining, d.Limit, Human(d.ResetAfter))
		return
	}
	mark := ""
	if p.TTY {
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
		when = fmt.Sprintf("; %d of %d left, retry after %s", d.Remaining, d.Limit, Human(d.RetryAfter))
	}
	p.Printf("%s: %s%s\n", p.Paint(Red, mark+verdict), what, when)
}
