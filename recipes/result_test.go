package recipes_test

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/recipes"
)

// NewResult's Limit, Remaining, ResetAfter, ID and Timestamp are the
// tightest enforcing policy's: the one that denied, else the one with the
// least of its limit left; never a policy in shadow mode or not decided.
func TestResultTightest(t *testing.T) {
	id := ledger.KeyID("req")
	policy := func(name string, limit, remaining uint64, reason ledger.Reason) recipes.PolicyResult {
		return recipes.PolicyResult{Policy: name, Amount: 1, Decision: ledger.Decision{Allowed: reason == ledger.Admitted,
			Reason: reason, Limit: limit, Remaining: remaining, ResetAfter: time.Duration(limit) * time.Second, ID: id, Timestamp: limit}}
	}
	shadow := policy("shadow", 10, 0, ledger.Admitted)
	shadow.Shadow = true
	skipped := policy("skipped", 10, 0, ledger.Admitted)
	skipped.Amount = 0
	for _, step := range []struct {
		name     string
		allowed  bool
		reason   ledger.Reason
		policies []recipes.PolicyResult
		want     string
	}{
		{"admitted: the least share left", true, ledger.Admitted,
			[]recipes.PolicyResult{shadow, policy("half", 10, 5, ledger.Admitted), skipped, policy("fifth", 100, 20, ledger.Admitted)}, "fifth"},
		{"equal shares: the first", true, ledger.Admitted,
			[]recipes.PolicyResult{policy("first", 10, 5, ledger.Admitted), policy("second", 100, 50, ledger.Admitted)}, "first"},
		{"denied: the denier", false, ledger.LimitExceeded,
			[]recipes.PolicyResult{policy("fit", 100, 0, ledger.Admitted), policy("refused", 10, 9, ledger.LimitExceeded)}, "refused"},
		{"nothing decided", true, ledger.Admitted, []recipes.PolicyResult{shadow, skipped}, ""},
	} {
		res := recipes.NewResult(step.allowed, step.reason, step.policies)
		var want ledger.Decision
		for _, p := range step.policies {
			if p.Policy == step.want {
				want = p.Decision
			}
		}
		got := ledger.Decision{Limit: res.Limit, Remaining: res.Remaining, ResetAfter: res.ResetAfter, ID: res.ID, Timestamp: res.Timestamp}
		want = ledger.Decision{Limit: want.Limit, Remaining: want.Remaining, ResetAfter: want.ResetAfter, ID: want.ID, Timestamp: want.Timestamp}
		if got != want {
			t.Errorf("%s: NewResult(...) Limit, Remaining, ResetAfter, ID, Timestamp = %+v, want %q's %+v", step.name, got, step.want, want)
		}
	}
}

// The limiters of the package all answer with a Result, and an HTTP
// middleware can ask each of them.
var _ = []recipes.Allower{(*recipes.RequestRate)(nil), (*recipes.Bandwidth)(nil), (*recipes.Limiter)(nil)}
