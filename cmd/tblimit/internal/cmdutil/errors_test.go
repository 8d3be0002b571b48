package cmdutil

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

func TestMessage(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: %q on api", ledger.ErrUnknownUser, "bob"), `unknown user: "bob" on api`},
		{fmt.Errorf("--addresses 3000: %w", ledger.ErrUnavailable), "--addresses 3000: cluster unavailable"},
		{fmt.Errorf("importing f.csv: %w", fmt.Errorf("ledger: provision %q: %w", "a", errors.New("ledger: boom"))), `importing f.csv: provision "a": boom`},
		{fmt.Errorf("%w: %q on api", ledger.ErrUnknownUser, "ledger: x"), `unknown user: "ledger: x" on api`}, // a key is printed as it is
		{fmt.Errorf("%w: %q on api", ledger.ErrUnknownUser, `a\"b: ledger: c`), `unknown user: "a\\\"b: ledger: c" on api`},
		{fmt.Errorf("USER: %w", fmt.Errorf("%w: empty user key", ledger.ErrInvalidKey)), "USER: empty user key"},
		{fmt.Errorf("%w: %s is in use", embedded.ErrBusy, "/d"), "journal busy: /d is in use"},
		{errors.New(`bare " quote: ledger: x`), `bare " quote: ledger: x`}, // unbalanced: left alone from there on
	} {
		if got := Message(c.err); got != c.want {
			t.Errorf("message(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}
