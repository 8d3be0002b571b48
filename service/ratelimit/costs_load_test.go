package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/service/ratelimit"
)

// costLoad is an AI gateway's traffic on one user: callers that each check
// before a call of 200 to 2,000 tokens lasting 20 ms, and charge its tokens
// after it, against a budget of tokens a second.
type costLoad struct {
	svc      *ratelimit.Service
	domain   string
	budget   uint64
	callers  int
	duration time.Duration
	paired   bool // the check holds the most a call may cost, under its ID
}

// call is one admitted call: when its check was answered, and its tokens.
type call struct {
	at     time.Duration
	tokens uint64
}

func (l *costLoad) run(t *testing.T) (calls []call, errs int, slow bool) {
	var mu sync.Mutex
	var waits []time.Duration // how long checks took
	var wg sync.WaitGroup
	start := time.Now()
	ask := func(hits uint64, kv ...string) (*rls.RateLimitResponse, error) {
		d := &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: "alice"}}}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		d.HitsAddend = wrapperspb.UInt64(hits)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return l.svc.ShouldRateLimit(ctx, &rls.RateLimitRequest{Domain: l.domain, Descriptors: []*rlcommon.RateLimitDescriptor{d}})
	}
	for g := range l.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Since(start) < l.duration; n++ {
				id := fmt.Sprintf("c%d-%d", g, n)
				var check *rls.RateLimitResponse
				var err error
				asked := time.Now()
				if l.paired {
					check, err = ask(2000, "check", id)
				} else {
					check, err = ask(0)
				}
				at := time.Since(start)
				mu.Lock()
				waits = append(waits, time.Since(asked))
				mu.Unlock()
				if err != nil {
					mu.Lock()
					if errs == 0 {
						t.Logf("first error: %v", err)
					}
					errs++
					mu.Unlock()
					continue
				}
				if check.GetOverallCode() != rls.RateLimitResponse_OK {
					time.Sleep(time.Millisecond) // the gateway answers 429; the next request follows
					continue
				}
				tokens := 200 + rand.Uint64N(1801)
				time.Sleep(20 * time.Millisecond)
				if l.paired {
					_, err = ask(tokens, "charge", id)
				} else {
					_, err = ask(tokens)
				}
				mu.Lock()
				if err != nil {
					if errs == 0 {
						t.Logf("first error: %v", err)
					}
					errs++
				}
				calls = append(calls, call{at, tokens})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// A check answered in more than 5 ms at the median is a machine too busy
	// to keep its callers calling: the share of the budget they used says
	// nothing then.
	slices.Sort(waits)
	return calls, errs, len(waits) == 0 || waits[len(waits)/2] > 5*time.Millisecond
}

// worstAligned is the most tokens the calls checked within one whole
// second from the start used, as a share of the budget, over the whole
// seconds of the run.
func worstAligned(calls []call, budget uint64, d time.Duration) float64 {
	per := make([]uint64, int(d/time.Second))
	for _, c := range calls {
		if i := int(c.at / time.Second); i < len(per) {
			per[i] += c.tokens
		}
	}
	var worst uint64
	for _, n := range per {
		worst = max(worst, n)
	}
	return float64(worst) / float64(budget)
}

func newCostService(t *testing.T, yaml string) (*ratelimit.Service, *ledger.Client, string) {
	t.Helper()
	c := ledger.New(embedded.New())
	svc, err := ratelimit.New(c)
	if err != nil {
		t.Fatal(err)
	}
	domain := domainOf(t)
	if err := svc.Load(context.Background(), config(t, domain, yaml)); err != nil {
		t.Fatal(err)
	}
	return svc, c, domain
}

// Under the load that made check-then-charge lose its charges (32 callers,
// 20,000 tokens a second): no charge is lost, and no whole second lets the
// calls use more than 2.5 times the budget; paired, the cluster's record
// never holds more than the budget in any window, and most of it is used.
func TestCostsAfterUnderLoad(t *testing.T) {
	d := 4 * time.Second
	if testing.Short() {
		d = 2 * time.Second
	}
	const budget = 20_000
	t.Run("check then charge", func(t *testing.T) {
		svc, _, domain := newCostService(t, `
domain: DOMAIN
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 20000, charge_after: true}
`)
		l := &costLoad{svc: svc, domain: domain, budget: budget, callers: 32, duration: d}
		calls, errs, _ := l.run(t)
		worst := worstAligned(calls, budget, d)
		t.Logf("%d calls, %d errors, worst aligned second %.2f× the budget", len(calls), errs, worst)
		if errs != 0 || worst > 2.5 {
			t.Fatalf("%d errors, worst second %.2f× the budget; want 0 and at most 2.5×", errs, worst)
		}
	})
	t.Run("paired", func(t *testing.T) {
		svc, c, domain := newCostService(t, `
domain: DOMAIN
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 20000, reserve_key: check, settle_key: charge}
`)
		from := time.Now()
		l := &costLoad{svc: svc, domain: domain, budget: budget, callers: 32, duration: d, paired: true}
		calls, errs, slow := l.run(t)
		var used uint64
		for _, c := range calls {
			used += c.tokens
		}
		r, ok := svc.Resource(mustRule(t, svc))
		if !ok {
			t.Fatal("no resource for the rule")
		}
		a, err := c.Audit(context.Background(), r, "alice", from, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		share := float64(used) / (budget * d.Seconds())
		t.Logf("%d calls, %d errors, %.2f of the budget used; audit: most in a window %d of %d", len(calls), errs, share, a.MostInWindow, budget)
		if errs != 0 || !a.OK() || a.MostInWindow > budget {
			t.Fatalf("%d errors, audit %+v; want 0 errors, at most the budget in any window", errs, a)
		}
		switch {
		case slow:
			t.Logf("checks took more than 5 ms at the median: the machine is too busy to judge the share used")
		case share < 0.8:
			t.Fatalf("%.2f of the budget used; want at least 0.8 when demand exceeds it", share)
		}
	})
}
