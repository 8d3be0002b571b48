package ratelimit_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/service/ratelimit"
	"github.com/tblimit/tblimit/testenv"
)

// metric reads one series off e's GET /metrics; a series not there is 0,
// as it is to Prometheus until its first count.
func (e *env) metric(series string) float64 {
	e.t.Helper()
	resp, err := http.Get(e.http + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		e.t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		e.t.Fatalf("/metrics: %s %s: %v", series, m[1], err)
	}
	return v
}

// Calls are counted by answer, the calls deciding are a gauge beside
// their bound, and the one past the bound is counted RESOURCE_EXHAUSTED.
func TestCallsByAnswer(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		if b.Real {
			t.Skip("the stalled network is simulated on the embedded engine")
		}
		sc := simnet.New(b.Client, simnet.Model{Name: "free"})
		t.Cleanup(sc.Close)
		e := start(t, b, ledger.New(sc, ledger.WithNow(b.Now), ledger.WithTimeout(time.Minute)), `
domain: DOMAIN
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1}
`, ratelimit.MaxWaiting(1))
		call := func(v string) (*rls.RateLimitResponse, error) {
			return e.call(&rls.RateLimitRequest{Domain: e.domain, Descriptors: []*rlcommon.RateLimitDescriptor{desc("k", v)}})
		}
		if got := e.metric("tblimit_ratelimit_max_waiting"); got != 1 {
			t.Errorf("tblimit_ratelimit_max_waiting = %v, want 1 (MaxWaiting)", got)
		}

		sc.SetFaults(simnet.Faults{Stall: true})
		inFlight := make(chan error, 1)
		go func() {
			_, err := call("a")
			inFlight <- err
		}()
		waitFor(t, func() bool { return sc.Stats().Stalled > 0 })
		if got := e.metric("tblimit_ratelimit_calls_waiting"); got != 1 {
			t.Errorf("tblimit_ratelimit_calls_waiting with a call stalled = %v, want 1", got)
		}
		if _, err := call("b"); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("a second call past MaxWaiting(1) = %v, want RESOURCE_EXHAUSTED", err)
		}
		sc.SetFaults(simnet.Faults{})
		if err := <-inFlight; err != nil {
			t.Fatalf("the stalled call = %v, want an answer once the cluster answers", err)
		}

		if r, err := call("a"); err != nil || r.GetOverallCode() != rls.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("a second hit of a limit of 1 = %v, %v; want OVER_LIMIT", r, err)
		}
		if _, err := e.call(&rls.RateLimitRequest{Domain: e.domain}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a call without descriptors = %v, want INVALID_ARGUMENT", err)
		}
		for series, want := range map[string]float64{
			`tblimit_ratelimit_calls_total{code="OK"}`:                                1,
			`tblimit_ratelimit_calls_total{code="OVER_LIMIT"}`:                        1,
			`tblimit_ratelimit_calls_total{code="ResourceExhausted"}`:                 1,
			`tblimit_ratelimit_calls_total{code="InvalidArgument"}`:                   1,
			`tblimit_ratelimit_call_duration_seconds_count{code="OK"}`:                2,
			`tblimit_ratelimit_call_duration_seconds_count{code="ResourceExhausted"}`: 1,
			`tblimit_ratelimit_calls_waiting`:                                         0,
		} {
			if got := e.metric(series); got != want {
				t.Errorf("/metrics: %s = %v, want %v", series, got, want)
			}
		}
	})
}
