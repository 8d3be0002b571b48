package recipes

import (
	"net/http"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/tblimit/tblimit/ledger"
)

func TestRateLimitFields(t *testing.T) {
	h := http.Header{}
	admitted := func(limit, remaining uint64, resetAfter time.Duration) ledger.Decision {
		return ledger.Decision{Allowed: true, Reason: ledger.Admitted, Limit: limit, Remaining: remaining, ResetAfter: resetAfter}
	}
	writeRateLimit(h, Result{Allowed: true, Reason: ledger.Admitted, policies: []PolicyResult{
		{Policy: "huge", Window: 49710 * 24 * time.Hour, Amount: 1, Decision: admitted(1<<63-1, 1<<62, 1500*time.Millisecond)},
		{Policy: `odd"na\me`, Unit: ContentBytes, Window: time.Minute, Decision: ledger.Decision{Limit: 7}}, // skipped: no state
		{Policy: "slots", Unit: ConcurrentRequests, Amount: 1, Decision: admitted(8, 3, time.Hour)},         // no t while admitted
	}})
	want := map[string]string{
		"RateLimit-Policy": `"huge";q=999999999999999;w=4294944000, "odd\"na\\me";q=7;qu="content-bytes";w=60, "slots";q=8;qu="concurrent-requests"`,
		"RateLimit":        `"huge";r=999999999999999;t=2, "slots";r=3`,
	}
	for name, v := range want {
		if got := h.Get(name); got != v {
			t.Errorf("%s: %s\nwant %s", name, got, v)
		}
		if _, err := httpsfv.UnmarshalList(h.Values(name)); err != nil {
			t.Errorf("%s does not parse: %v", name, err)
		}
	}
	writeRateLimit(h, Result{})
	if len(h.Values("RateLimit")) != 1 {
		t.Errorf("no items added a line: %q", h.Values("RateLimit"))
	}
}

// PolicyFields reports every policy as it is, as tblimit.v1's HTTP answers
// do: money in currency units, and a decision not made (the cluster
// unavailable) in RateLimit-Policy only.
func TestPolicyFields(t *testing.T) {
	money := ledger.Resource{Name: "usd-day", Kind: ledger.KindMoney, Window: 24 * time.Hour}
	bytes := ledger.Resource{Name: "upload", Kind: ledger.KindBytes, Window: time.Minute}
	paid := PolicyOf(ledger.Part{Resource: money, Request: ledger.Request{User: " bob", Amount: 600_00}},
		ledger.Decision{Allowed: true, Reason: ledger.Admitted, Limit: 1000_00, Remaining: 400_00, ResetAfter: 24 * time.Hour})
	unanswered := PolicyOf(ledger.Part{Resource: bytes, Request: ledger.Request{User: "bob", Amount: 10}},
		ledger.Decision{Reason: ledger.Unavailable, Limit: 1000})
	policy, state := PolicyFields(paid, unanswered)
	if want := `"usd-day";q=100000;qu="currency-units";w=86400, "upload";q=1000;qu="content-bytes";w=60`; policy != want {
		t.Errorf("PolicyFields(...) policy = %s, want %s", policy, want)
	}
	if want := `"usd-day";r=40000;t=86400`; state != want {
		t.Errorf("PolicyFields(...) state = %s, want %s", state, want)
	}
	if paid.Key != "" || unanswered.Key != "bob" {
		t.Errorf("PolicyOf keys = %q, %q; want \"\" for a key that is not valid, and bob", paid.Key, unanswered.Key)
	}
}
