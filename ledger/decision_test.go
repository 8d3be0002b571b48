package ledger_test

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

func TestDecisionResetIn(t *testing.T) {
	for _, c := range []struct {
		name string
		d    ledger.Decision
		want time.Duration
	}{
		{"admitted", ledger.Decision{Allowed: true, Reason: ledger.Admitted, RetryAfter: 0, ResetAfter: 5 * time.Second}, 5 * time.Second},
		{"denied", ledger.Decision{Reason: ledger.LimitExceeded, RetryAfter: 2 * time.Second, ResetAfter: 5 * time.Second}, 2 * time.Second},
		{"denied for ever", ledger.Decision{Reason: ledger.LimitExceeded, RetryAfter: -1, ResetAfter: 5 * time.Second}, 5 * time.Second},
		{"short of funds", ledger.Decision{Reason: ledger.InsufficientFunds, ResetAfter: 3 * time.Second}, 3 * time.Second},
		{"unavailable", ledger.Decision{Reason: ledger.Unavailable}, 0},
	} {
		if got := c.d.ResetIn(); got != c.want {
			t.Errorf("%s: %+v.ResetIn() = %v, want %v", c.name, c.d, got, c.want)
		}
	}
}
