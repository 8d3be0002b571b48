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
	writeRateLimit(h, Result{Allowed: true, Reason: ledger.Admitted, Policies: []PolicyResult{
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
