package recipes

import (
	"net/http"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
)

func TestRateLimitFields(t *testing.T) {
	h := http.Header{}
	writeRateLimit(h, []policyItem{
		{name: "huge", quota: 1<<63 - 1, window: 49710 * 24 * time.Hour, known: true, remaining: 1 << 62, reset: 1500 * time.Millisecond},
		{name: `odd"na\me`, unit: ContentBytes, quota: 7, window: time.Minute},
		{name: "slots", unit: ConcurrentRequests, quota: 8, known: true, remaining: 3, noReset: true},
	})
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
	writeRateLimit(h, nil)
	if len(h.Values("RateLimit")) != 1 {
		t.Errorf("no items added a line: %q", h.Values("RateLimit"))
	}
}
