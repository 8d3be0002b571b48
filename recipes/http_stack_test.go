package recipes_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/recipes"
	"github.com/tblimit/tblimit/testenv"
)

// lastResult is an Observer that keeps the last decision.
type lastResult struct {
	mu sync.Mutex
	r  recipes.Result
}

func (l *lastResult) ObserveResult(e recipes.Event) {
	l.mu.Lock()
	l.r = e.Result
	l.mu.Unlock()
}

func (l *lastResult) get() recipes.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r
}

// ceil is d in whole seconds, rounded up.
func ceil(d time.Duration) int64 { return int64(math.Ceil(max(d, 0).Seconds())) }

// checkRateLimitHeaders parses the RateLimit-Policy and RateLimit fields of
// h with an RFC 9651 parser that is not ours, and checks every item
// against the decision res: one item per enforcing policy, in order, with
// its name, q, qu, w, and (when it was decided) r and t.
func checkRateLimitHeaders(t *testing.T, h http.Header, res recipes.Result) {
	t.Helper()
	policies, err := httpsfv.UnmarshalList(h.Values("RateLimit-Policy"))
	if err != nil {
		t.Fatalf("RateLimit-Policy %q: %v", h.Values("RateLimit-Policy"), err)
	}
	states, err := httpsfv.UnmarshalList(h.Values("RateLimit"))
	if err != nil {
		t.Fatalf("RateLimit %q: %v", h.Values("RateLimit"), err)
	}
	param := func(it httpsfv.Item, name string) (any, bool) { return it.Params.Get(name) }
	var want, wantStates []recipes.PolicyResult
	for _, p := range res.Policies() {
		if !p.Shadow {
			want = append(want, p)
			if !p.Skipped() {
				wantStates = append(wantStates, p)
			}
		}
	}
	if len(policies) != len(want) || len(states) != len(wantStates) {
		t.Fatalf("%d policy items and %d state items (%q, %q), want %d and %d", len(policies), len(states), h.Values("RateLimit-Policy"), h.Values("RateLimit"), len(want), len(wantStates))
	}
	for i, p := range want {
		it, ok := policies[i].(httpsfv.Item)
		if !ok || it.Value != p.Policy {
			t.Fatalf("RateLimit-Policy item %d = %#v, want the String %q", i, policies[i], p.Policy)
		}
		if q, _ := param(it, "q"); q != int64(p.Decision.Limit) {
			t.Errorf("%s: q = %v, want %d", p.Policy, q, p.Decision.Limit)
		}
		if w, _ := param(it, "w"); w != int64(p.Window/time.Second) {
			t.Errorf("%s: w = %v, want %d", p.Policy, w, p.Window/time.Second)
		}
		qu, has := param(it, "qu")
		if has != (p.Unit != recipes.Requests) || has && qu != p.Unit.String() {
			t.Errorf("%s: qu = %v (present %v), want %q only when not requests", p.Policy, qu, has, p.Unit)
		}
	}
	for i, p := range wantStates {
		it, ok := states[i].(httpsfv.Item)
		if !ok || it.Value != p.Policy {
			t.Fatalf("RateLimit item %d = %#v, want the String %q", i, states[i], p.Policy)
		}
		if r, _ := param(it, "r"); r != int64(p.Decision.Remaining) {
			t.Errorf("%s: r = %v, want %d", p.Policy, r, p.Decision.Remaining)
		}
		wantT := p.Decision.ResetAfter
		if p.Decision.Reason == ledger.LimitExceeded {
			wantT = p.Decision.RetryAfter
		}
		if !res.Allowed && res.RetryAfter >= 0 {
			wantT = min(wantT, res.RetryAfter) // Retry-After is never earlier than a t
		}
		if tt, _ := param(it, "t"); tt != ceil(wantT) {
			t.Errorf("%s: t = %v, want %d", p.Policy, tt, ceil(wantT))
		}
	}
	if !res.Allowed && res.RetryAfter > 0 {
		if got, want := h.Get("Retry-After"), strconv.FormatInt(ceil(res.RetryAfter), 10); got != want {
			t.Errorf("Retry-After %q, want %q", got, want)
		}
		for _, it := range states {
			if tt, _ := it.(httpsfv.Item).Params.Get("t"); tt.(int64) > ceil(res.RetryAfter) {
				t.Errorf("t = %v later than Retry-After %v", tt, res.RetryAfter)
			}
		}
	}
}

// The middleware reports every enforcing policy of the stack, with the
// decision's numbers, in fields a current RFC 9651 parser reads.
func TestStackMiddlewareHeaders(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		short, long := windows(b)
		c := ledger.New(b.Client)
		perIP := newLimiter(t, b, c, "ip", []recipes.Policy{
			{Name: "ip-fast", Limit: recipes.Per(2, short), Lazy: true},
			{Name: "ip-bytes", Limit: recipes.Bytes(1000).Per(long), Unit: recipes.ContentBytes, Lazy: true},
		})
		perKey := newLimiter(t, b, c, "key", []recipes.Policy{{Name: "key-slow", Limit: recipes.Per(5, long), Lazy: true}})
		trial := newLimiter(t, b, c, "trial", []recipes.Policy{{Name: "trial", Limit: recipes.Per(1, long), Lazy: true}}, recipes.Shadow())
		var last lastResult
		s, err := recipes.NewStack("api", []recipes.Layer[*http.Request]{
			{Limiter: perIP, Key: recipes.ClientIP(recipes.Proxies{})},
			{Limiter: perKey, Key: recipes.Header("X-Api-Key")},
			{Limiter: trial, Key: recipes.Header("X-Api-Key")},
		}, recipes.WithObserver(&last))
		if err != nil {
			t.Fatal(err)
		}
		h := recipes.StackMiddleware(s, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		do := func(key, body string) *httptest.ResponseRecorder {
			req := httptest.NewRequest("POST", "/", strings.NewReader(body))
			if body == "" {
				req = httptest.NewRequest("GET", "/", nil)
			}
			if key != "" {
				req.Header.Set("X-Api-Key", key)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		for i, step := range []struct {
			key, body string
			code      int
		}{
			{"k1", strings.Repeat("x", 100), 200},
			{"k1", "", 200}, // no content: ip-bytes in RateLimit-Policy only
			{"k1", "", 429}, // ip-fast
		} {
			rec := do(step.key, step.body)
			if rec.Code != step.code {
				t.Fatalf("step %d: %d, want %d (%v)", i, rec.Code, step.code, rec.Header())
			}
			checkRateLimitHeaders(t, rec.Header(), last.get())
		}
		if rec := do("", "x"); rec.Code != http.StatusBadRequest || rec.Header().Get("RateLimit") != "" {
			t.Fatalf("no API key: %d %v, want 400 without RateLimit", rec.Code, rec.Header())
		}
		// Over ip-fast for a while and over ip-bytes for ever: waiting
		// would not help, so 413, not 429.
		if rec := do("k1", strings.Repeat("x", 1001)); rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("content over the whole bytes limit while over another policy: %d, want 413", rec.Code)
		}
		b.Advance(t, short+time.Millisecond)
		waitPeek(t, b, perIP, "192.0.2.1", []uint64{0, 100})
		if rec := do("k1", strings.Repeat("x", 1001)); rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("content over the whole bytes limit: %d, want 413", rec.Code)
		}
	})
}

// End to end through a real net/http server and client: a stack of three
// limiters (global, per API key, per API key and route) answers 200, then
// 429 with Retry-After and the RateLimit fields, 400 without a key, and 503
// while the cluster does not answer, unless the stack fails open.
func TestStackMiddlewareEndToEnd(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		_, w := windows(b)
		sc, c := stallable(t, b, ledger.WithTimeout(300*time.Millisecond))
		global := newLimiter(t, b, c, "global", []recipes.Policy{{Name: "global", Limit: recipes.Per(1000, w), Lazy: true}})
		perKey := newLimiter(t, b, c, "customer", []recipes.Policy{{Name: "customer", Limit: recipes.Per(10, w), Lazy: true}})
		perRoute := newLimiter(t, b, c, "route", []recipes.Policy{{Name: "route", Limit: recipes.Per(2, w), Lazy: true}})
		layers := []recipes.Layer[*http.Request]{
			{Limiter: global, Key: recipes.Const("all")},
			{Limiter: perKey, Key: recipes.Header("X-Api-Key")},
			{Limiter: perRoute, Key: recipes.Composite(recipes.Header("X-Api-Key"), recipes.Pattern())},
		}
		var last lastResult
		strict, err := recipes.NewStack("strict", layers, recipes.WithObserver(&last))
		if err != nil {
			t.Fatal(err)
		}
		open, err := recipes.NewStack("open", layers, recipes.WithUnavailable(ledger.FailOpen))
		if err != nil {
			t.Fatal(err)
		}
		ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "done") })
		mux := http.NewServeMux()
		mux.Handle("POST /pay", recipes.StackMiddleware(strict, nil)(ok))
		mux.Handle("POST /refund", recipes.StackMiddleware(strict, nil)(ok))
		mux.Handle("POST /open", recipes.StackMiddleware(open, nil)(ok))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		post := func(path, key string) *http.Response {
			t.Helper()
			req, _ := http.NewRequest("POST", srv.URL+path, nil)
			if key != "" {
				req.Header.Set("X-Api-Key", key)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp
		}
		for i, step := range []struct {
			path string
			code int
		}{{"/pay", 200}, {"/pay", 200}, {"/pay", 429}, {"/refund", 200}} {
			resp := post(step.path, "cust-1")
			if resp.StatusCode != step.code {
				t.Fatalf("step %d: POST %s = %d, want %d", i, step.path, resp.StatusCode, step.code)
			}
			res := last.get()
			checkRateLimitHeaders(t, resp.Header, res)
			if step.code == 429 && (res.DeniedBy != "route" || resp.Header.Get("Retry-After") == "" || len(res.Policies()) != 3) {
				t.Fatalf("429: %+v, Retry-After %q; want denied by route", res, resp.Header.Get("Retry-After"))
			}
		}
		if resp := post("/pay", ""); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("no key: %d, want 400", resp.StatusCode)
		}
		sc.SetFaults(simnet.Faults{Stall: true})
		resp := post("/pay", "cust-2")
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("cluster stalled: %d %v, want 503 with Retry-After: 1", resp.StatusCode, resp.Header)
		}
		if resp := post("/open", "cust-3"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("cluster stalled, fail-open stack: %d %v, want 200 without RateLimit", resp.StatusCode, resp.Header)
		}
		sc.SetFaults(simnet.Faults{})
		if resp := post("/refund", "cust-2"); resp.StatusCode != 200 {
			t.Fatalf("cluster back: %d, want 200", resp.StatusCode)
		}
	})
}

// The concurrency middleware holds a slot while the handler runs and gives
// it back when it returns, or panics.
func TestConcurrencyMiddleware(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		cl, err := recipes.NewConcurrency(ledger.New(b.Client), recipes.Config{Name: "inflight", Ledger: b.NewLedger(), Lazy: true}, 2, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Create(ctx); err != nil {
			t.Fatal(err)
		}
		release, entered := make(chan struct{}), make(chan struct{})
		h := recipes.ConcurrencyMiddleware(cl, recipes.Header("X-Api-Key"))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/panic" {
				panic("handler failed")
			}
			entered <- struct{}{}
			<-release
		}))
		do := func(path string) *httptest.ResponseRecorder {
			req := httptest.NewRequest("GET", path, nil)
			req.Header.Set("X-Api-Key", "k")
			rec := httptest.NewRecorder()
			func() {
				defer func() { _ = recover() }()
				h.ServeHTTP(rec, req)
			}()
			return rec
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { do("/") })
			<-entered
		}
		rec := do("/")
		if rec.Code != 429 || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("a third request in flight: %d %v, want 429 with Retry-After", rec.Code, rec.Header())
		}
		items, err := httpsfv.UnmarshalList(rec.Header().Values("RateLimit-Policy"))
		if err != nil || len(items) != 1 {
			t.Fatalf("RateLimit-Policy %q: %v", rec.Header().Values("RateLimit-Policy"), err)
		}
		it := items[0].(httpsfv.Item)
		if qu, _ := it.Params.Get("qu"); qu != "concurrent-requests" || it.Value != "inflight" {
			t.Fatalf("RateLimit-Policy item %#v, want inflight with qu=concurrent-requests", it)
		}
		close(release)
		wg.Wait()
		if u, err := cl.Inspect(ctx, "k"); err != nil || u.InFlight != 0 {
			t.Fatalf("after the handlers returned: %+v, %v; want nothing in flight", u, err)
		}
		do("/panic")
		if u, err := cl.Inspect(ctx, "k"); err != nil || u.InFlight != 0 {
			t.Fatalf("after a handler panicked: %+v, %v; want nothing in flight", u, err)
		}
	})
}

// A policy in shadow mode never fails a request: not for a key its
// limiter cannot use (empty, or unknown to a policy that is not Lazy), nor
// when the cluster does not answer a decision of shadow policies only. It
// is left out, and the Result names it.
func TestShadowNeverFails(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		_, w := windows(b)
		sc, c := stallable(t, b, ledger.WithTimeout(300*time.Millisecond))
		perIP := newLimiter(t, b, c, "ip", []recipes.Policy{{Name: "ip", Limit: recipes.Per(100, w), Lazy: true}})
		// Tried out: keyed by API keys, which are not provisioned yet.
		trial := newLimiter(t, b, c, "apikey", []recipes.Policy{{Name: "apikey", Limit: recipes.Per(10, w)}}, recipes.Shadow())
		var last lastResult
		s, err := recipes.NewStack("api", []recipes.Layer[*http.Request]{
			{Limiter: perIP, Key: recipes.ClientIP(recipes.Proxies{})},
			{Limiter: trial, Key: recipes.Header("X-Api-Key")},
		}, recipes.WithObserver(&last))
		if err != nil {
			t.Fatal(err)
		}
		all, err := recipes.NewStack("trial", []recipes.Layer[*http.Request]{{Limiter: perIP, Key: recipes.ClientIP(recipes.Proxies{})}}, recipes.Shadow())
		if err != nil {
			t.Fatal(err)
		}
		ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
		do := func(s *recipes.Stack[*http.Request], apiKey string) int {
			r := httptest.NewRequest("GET", "/", nil)
			if apiKey != "" {
				r.Header.Set("X-Api-Key", apiKey)
			}
			rec := httptest.NewRecorder()
			recipes.StackMiddleware(s, nil)(ok).ServeHTTP(rec, r)
			return rec.Code
		}
		for _, apiKey := range []string{"", "never-provisioned"} {
			if code := do(s, apiKey); code != http.StatusOK {
				t.Fatalf("X-Api-Key %q: %d from a policy in shadow mode, want 200", apiKey, code)
			}
			res := last.get()
			if !res.Allowed || len(res.ShadowFailed) != 1 || res.ShadowFailed[0] != "apikey" || res.Policies()[0].Decision.Remaining != 99 {
				t.Fatalf("X-Api-Key %q: %+v; want allowed, the ip policy taken once, apikey left out", apiKey, res)
			}
			waitPeek(t, b, perIP, "192.0.2.1", []uint64{1})
			if _, err := perIP.Reset(context.Background(), "192.0.2.1"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := trial.Peek(context.Background(), ""); !errors.Is(err, ledger.ErrInvalidKey) {
			t.Fatalf("Peek of a shadow limiter with an empty key: %v, want ErrInvalidKey", err)
		}
		sc.SetFaults(simnet.Faults{Stall: true})
		defer sc.SetFaults(simnet.Faults{})
		if code := do(all, ""); code != http.StatusOK {
			t.Fatalf("cluster stalled, a stack in shadow mode: %d, want 200", code)
		}
		if code := do(s, "k"); code != http.StatusServiceUnavailable {
			t.Fatalf("cluster stalled, an enforcing policy: %d, want 503", code)
		}
	})
}

// Under FailClosed, an unanswered decision is the cluster's failure, not
// the client's: 503 with Retry-After: 1 and no RateLimit fields, from both
// middlewares. A concurrency slot whose answer was lost is given back once
// the cluster answers.
func TestMiddlewaresUnavailable(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		_, w := windows(b)
		sc, c := stallable(t, b, ledger.WithUnavailable(ledger.FailClosed), ledger.WithTimeout(5*time.Second))
		rl, err := recipes.NewRequestRate(c, recipes.Config{Name: "http", Ledger: b.NewLedger(), Lazy: true}, recipes.Per(5, w))
		if err != nil {
			t.Fatal(err)
		}
		cl, err := recipes.NewConcurrency(c, recipes.Config{Name: "inflight", Ledger: b.NewLedger(), Lazy: true}, 2, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, create := range []func(context.Context) error{rl.Create, cl.Create} {
			if err := create(ctx); err != nil {
				t.Fatal(err)
			}
		}
		ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
		key := recipes.Header("X-Api-Key")
		for name, h := range map[string]http.Handler{
			"Middleware":            recipes.Middleware(rl, key, nil)(ok),
			"ConcurrencyMiddleware": recipes.ConcurrencyMiddleware(cl, key)(ok),
		} {
			h.ServeHTTP(httptest.NewRecorder(), keyed("warm")) // the user exists: the next call is one create
			sc.SetFaults(simnet.Faults{DropReply: 1})          // applied, but the answer is lost
			rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, keyed("warm").WithContext(rctx))
			cancel()
			sc.SetFaults(simnet.Faults{})
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" ||
				rec.Header().Get("RateLimit-Policy") != "" || rec.Header().Get("RateLimit-Limit") != "" {
				t.Fatalf("%s, answer lost: %d %v; want 503 with Retry-After: 1 and no RateLimit fields", name, rec.Code, rec.Header())
			}
		}
		// The slot the lost answer held is given back: only the warm-up's
		// came and went.
		deadline := time.Now().Add(10 * time.Second)
		for {
			u, err := cl.Inspect(ctx, "warm")
			if err != nil {
				t.Fatal(err)
			}
			if u.InFlight == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a slot whose answer was lost is still held: %+v", u)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// Under FailOpen, an unanswered decision lets the request through, and
// Middleware writes no limit it does not know: no RateLimit field, neither
// the draft's nor the older RateLimit-Limit, -Remaining and -Reset (which
// would tell the client it has no quota).
func TestMiddlewareFailsOpenWithoutFields(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		_, w := windows(b)
		sc, c := stallable(t, b, ledger.WithUnavailable(ledger.FailOpen), ledger.WithTimeout(5*time.Second))
		rl, err := recipes.NewRequestRate(c, recipes.Config{Name: "http", Ledger: b.NewLedger(), Lazy: true}, recipes.Per(5, w))
		if err != nil {
			t.Fatal(err)
		}
		if err := rl.Create(ctx); err != nil {
			t.Fatal(err)
		}
		calls := 0
		h := recipes.Middleware(rl, recipes.Header("X-Api-Key"), nil)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls++ }))
		h.ServeHTTP(httptest.NewRecorder(), keyed("warm")) // the user exists: the next call is one create
		sc.SetFaults(simnet.Faults{DropReply: 1})          // applied, but the answer is lost
		rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, keyed("warm").WithContext(rctx))
		cancel()
		sc.SetFaults(simnet.Faults{})
		if rec.Code != http.StatusOK || calls != 2 {
			t.Fatalf("answer lost, failing open: %d, handler called %d times; want 200, 2", rec.Code, calls)
		}
		for _, f := range []string{"RateLimit-Policy", "RateLimit", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
			if v := rec.Header().Values(f); len(v) > 0 {
				t.Errorf("answer lost, failing open: %s: %q; want no RateLimit field", f, v)
			}
		}
	})
}

func keyed(key string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Api-Key", key)
	return r
}

// stallable returns a Client on b's cluster behind a network that costs
// nothing but can be stalled at will (sc.SetFaults), with b's clock and
// opts.
func stallable(t *testing.T, b *testenv.Backend, opts ...ledger.Option) (*simnet.Client, *ledger.Client) {
	t.Helper()
	sc := simnet.New(b.Client, simnet.Model{Name: "free"})
	t.Cleanup(sc.Close)
	c := ledger.New(sc, append([]ledger.Option{ledger.WithNow(b.Now)}, opts...)...)
	warmUp(t, c)
	return sc, c
}

// warmUp has c's first call answered, on a deadline of its own: on a real
// server it registers the client's session, which takes longer (0.4-0.6 s)
// than the short timeouts of tests that stall the network.
func warmUp(t *testing.T, c *ledger.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v", err)
	}
}

// A handler reaches the middleware's Result, decides more itself and
// answers a denial as the middleware would; options answer denials and
// errors otherwise, and exempt requests take nothing.
func TestStackMiddlewareOptions(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c := ledger.New(b.Client, ledger.WithNow(b.Now))
		warmUp(t, c)
		perKey := newLimiter(t, b, c, "customer", []recipes.Policy{{Name: "customer", Limit: recipes.PerMinute(2), Lazy: true}})
		merchant := newLimiter(t, b, c, "merchant", []recipes.Policy{{Name: "merchant", Limit: recipes.PerMinute(1), Lazy: true}})
		s, err := recipes.NewStack("api", []recipes.Layer[*http.Request]{{Limiter: perKey, Key: recipes.Header("X-Api-Key")}})
		if err != nil {
			t.Fatal(err)
		}
		pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			res, ok := recipes.ResultOf(r)
			if exempt := r.Header.Get("X-Api-Key") == "ops"; exempt == ok {
				t.Errorf("ResultOf in the handler, exempt %v: found %v", exempt, ok)
			} else if !exempt && (!res.Allowed || len(res.Policies()) != 1 || res.Policies()[0].Policy != "customer") {
				t.Errorf("ResultOf in the handler = %+v, %v; want the admitted Result of the customer policy", res, ok)
			}
			// The merchant is in the body: decided here.
			m, err := merchant.Allow(r.Context(), r.URL.Query().Get("merchant"))
			if err != nil {
				t.Error(err)
				return
			}
			if !m.Allowed {
				recipes.Deny(w, m)
				return
			}
			io.WriteString(w, "paid")
		})
		mux := http.NewServeMux()
		mux.Handle("/pay", recipes.StackMiddleware(s, nil, recipes.Exempt(func(r *http.Request) bool { return r.Header.Get("X-Api-Key") == "ops" }),
			recipes.OnDenied(func(w http.ResponseWriter, _ *http.Request, res recipes.Result) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprintf(w, `{"error":"slow down","policy":%q}`, res.DeniedBy)
			}),
			recipes.OnError(func(w http.ResponseWriter, _ *http.Request, err error) {
				http.Error(w, `{"error":"bad key"}`, http.StatusBadRequest)
			}))(pay))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		do := func(key, merchant string) (int, http.Header, string) {
			t.Helper()
			req, _ := http.NewRequest("POST", srv.URL+"/pay?merchant="+merchant, nil)
			if key != "" {
				req.Header.Set("X-Api-Key", key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, resp.Header, string(body)
		}
		if code, _, body := do("acme", "shop1"); code != 200 || body != "paid" {
			t.Fatalf("first payment = %d %q, want 200 paid", code, body)
		}
		code, h, _ := do("acme", "shop1")
		if code != 429 || h.Get("Retry-After") == "" || !strings.Contains(strings.Join(h.Values("RateLimit-Policy"), ", "), `"merchant";q=1`) {
			t.Errorf("a second payment to the merchant = %d %v, want 429 from the handler with Retry-After and the merchant's policy", code, h)
		}
		if code, _, body := do("acme", "shop2"); code != 429 || body != `{"error":"slow down","policy":"customer"}` {
			t.Errorf("a third payment = %d %q, want the OnDenied answer naming the customer policy", code, body)
		}
		if code, _, body := do("", "shop3"); code != 400 || !strings.Contains(body, "bad key") {
			t.Errorf("no key = %d %q, want the OnError answer", code, body)
		}
		for i := range 3 { // the customer limit is 2: an exempt key is not limited by it
			if _, h, _ := do("ops", fmt.Sprint("shop-ops-", i)); strings.Contains(strings.Join(h.Values("RateLimit-Policy"), ","), "customer") {
				t.Errorf("an exempt request reports the customer policy: %v", h)
			}
		}
		if u, err := c.Inspect(context.Background(), perKey.Resources()[0], "ops"); err == nil && u.InFlight != 0 {
			t.Errorf("the exempt key holds %d, want nothing taken", u.InFlight)
		}
	})
}

// A body of unknown length (chunked) cannot be counted before it is read:
// under a bytes policy and the default cost it is refused with 411, where
// the same body with its Content-Length is decided (413 over the whole
// limit); without a bytes policy it goes ahead.
func TestStackMiddlewareChunkedBody(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c := ledger.New(b.Client, ledger.WithNow(b.Now))
		warmUp(t, c)
		upload := newLimiter(t, b, c, "upload", []recipes.Policy{{Name: "upload", Limit: recipes.Bytes(1000).Per(time.Minute), Lazy: true}})
		calls := newLimiter(t, b, c, "calls", []recipes.Policy{{Name: "calls", Limit: recipes.PerMinute(100), Lazy: true}})
		bytesStack, err := recipes.NewStack("bytes", []recipes.Layer[*http.Request]{{Limiter: upload, Key: recipes.Const("all")}})
		if err != nil {
			t.Fatal(err)
		}
		callStack, err := recipes.NewStack("calls", []recipes.Layer[*http.Request]{{Limiter: calls, Key: recipes.Const("all")}})
		if err != nil {
			t.Fatal(err)
		}
		ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
		mux := http.NewServeMux()
		mux.Handle("/bytes", recipes.StackMiddleware(bytesStack, nil)(ok))
		mux.Handle("/calls", recipes.StackMiddleware(callStack, nil)(ok))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		post := func(path string, chunked bool) int {
			t.Helper()
			body := strings.Repeat("x", 1200)
			req, _ := http.NewRequest("POST", srv.URL+path, io.MultiReader(strings.NewReader(body)))
			if !chunked {
				req.ContentLength = int64(len(body))
			} else {
				req.ContentLength = -1
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		for _, c := range []struct {
			path    string
			chunked bool
			want    int
		}{{"/bytes", true, 411}, {"/bytes", false, 413}, {"/calls", true, 200}} {
			if got := post(c.path, c.chunked); got != c.want {
				t.Errorf("POST %s of 1200 bytes, chunked %v = %d, want %d", c.path, c.chunked, got, c.want)
			}
		}
	})
}

// A Limiter has a middleware of its own, a stack of one.
func TestLimiterMiddleware(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c := ledger.New(b.Client, ledger.WithNow(b.Now))
		warmUp(t, c)
		l := newLimiter(t, b, c, "api", []recipes.Policy{{Name: "api", Limit: recipes.PerMinute(1), Lazy: true}})
		srv := httptest.NewServer(l.Middleware(recipes.Header("X-Api-Key"), nil)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
		t.Cleanup(srv.Close)
		for i, want := range []int{200, 429} {
			req, _ := http.NewRequest("GET", srv.URL, nil)
			req.Header.Set("X-Api-Key", "k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want || resp.Header.Get("RateLimit-Policy") != `"api";q=1;w=60` {
				t.Errorf("request %d = %d %v, want %d with the policy's fields", i, resp.StatusCode, resp.Header, want)
			}
		}
	})
}
