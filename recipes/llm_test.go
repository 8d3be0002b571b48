package recipes_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/recipes"
)

func newLLM(t *testing.T) (*recipes.LLM, *ledger.Client, *embedded.ManualClock) {
	t.Helper()
	clock := embedded.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := ledger.New(embedded.New(embedded.WithClock(clock)), ledger.WithNow(clock.Now))
	l, err := recipes.NewLLM(c, recipes.LLMConfig{Name: "gpt", Ledger: 10, TokensPerMinute: 10000, RequestsPerMinute: 3, TokensPerDay: 15000, Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l, c, clock
}

func inFlight(t *testing.T, c *ledger.Client, r ledger.Resource, key string) uint64 {
	t.Helper()
	u, err := c.Inspect(context.Background(), r, key)
	if err != nil {
		t.Fatal(err)
	}
	return u.InFlight
}

// A call reserves its max tokens and a request on every limit, all or
// none, and settles to what it used: kept for each limit's window, the rest
// back at once.
func TestLLMReserveSettle(t *testing.T) {
	ctx := context.Background()
	l, c, clock := newLLM(t)
	rs := l.Resources()
	key := recipes.LLMKey("alice", "gpt-5")
	call, err := l.Reserve(ctx, "alice", "gpt-5", 4000)
	if err != nil || !call.OK() {
		t.Fatalf("Reserve(4000) = %+v, %v", call, err)
	}
	if got := inFlight(t, c, rs[0], key); got != 4000 {
		t.Fatalf("tokens per minute held: %d, want 4000", got)
	}
	if err := call.Settle(ctx, 1200); err != nil {
		t.Fatal(err)
	}
	if err := call.Settle(ctx, 1200); err != nil {
		t.Fatalf("Settle again = %v, want nil (the same settlement)", err)
	}
	for i, want := range []uint64{1200, 1, 1200} {
		if got := inFlight(t, c, rs[i], key); got != want {
			t.Fatalf("%s after settling 1200: %d in flight, want %d", rs[i].Name, got, want)
		}
	}
	// More than the max: the rest is charged.
	call, _ = l.Reserve(ctx, "alice", "gpt-5", 1000)
	if err := call.Settle(ctx, 1500); err != nil {
		t.Fatal(err)
	}
	if got := inFlight(t, c, rs[2], key); got != 2700 {
		t.Fatalf("tokens per day after 1200 and 1500: %d, want 2700", got)
	}
	// The third request of the minute fits; the fourth is denied by the
	// request limit, and holds no tokens.
	call, _ = l.Reserve(ctx, "alice", "gpt-5", 100)
	if err := call.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if call, err = l.Reserve(ctx, "alice", "gpt-5", 100); err != nil || !call.OK() {
		t.Fatalf("the third call = %+v, %v; want reserved (the cancelled one gave its request back)", call, err)
	}
	denied, err := l.Reserve(ctx, "alice", "gpt-5", 100)
	if err != nil || denied.OK() || denied.Result().Reason != ledger.LimitExceeded || denied.Result().RetryAfter <= 0 {
		t.Fatalf("the fourth call in a minute = %+v, %v; want denied, with a retry time", denied.Result(), err)
	}
	if err := denied.Settle(ctx, 10); !errors.Is(err, ledger.ErrReservationEnded) {
		t.Fatalf("Settle of a denied call = %v, want ErrReservationEnded", err)
	}
	if got := inFlight(t, c, rs[0], key); got != 2800 {
		t.Fatalf("tokens per minute after a denied call: %d, want 2800", got)
	}
	// A minute later the minute's limits are back; the day's are not.
	clock.Advance(time.Minute + 2*time.Second)
	if got := inFlight(t, c, rs[0], key); got != 0 {
		t.Fatalf("tokens per minute a minute later: %d, want 0", got)
	}
	if got := inFlight(t, c, rs[2], key); got != 2800 {
		t.Fatalf("tokens per day a minute later: %d, want 2800", got)
	}
	if _, err := l.Reserve(ctx, "alice", "gpt-5", 0); !errors.Is(err, ledger.ErrInvalidAmount) {
		t.Fatalf("Reserve(0) = %v, want ErrInvalidAmount", err)
	}
	if _, err := recipes.NewLLM(c, recipes.LLMConfig{Name: "none", Ledger: 20}); err == nil {
		t.Fatal("NewLLM with no limit = nil error")
	}
}

// The middleware reserves before the handler and settles to what the
// handler's response says the call used.
func TestLLMMiddleware(t *testing.T) {
	l, c, _ := newLLM(t)
	h := recipes.LLMMiddleware(l,
		func(r *http.Request) (string, string, uint64) {
			n, _ := strconv.ParseUint(r.Header.Get("Max-Tokens"), 10, 64)
			return r.Header.Get("User"), "gpt-5", n
		},
		recipes.UsedFromHeader,
	)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(recipes.TokensUsedHeader, "300")
		w.WriteHeader(http.StatusOK)
	}))
	do := func(user string, max string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		r.Header.Set("User", user)
		r.Header.Set("Max-Tokens", max)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := do("bob", "9000"); w.Code != 200 || w.Header().Get("RateLimit-Policy") == "" {
		t.Fatalf("first call = %d %v, want 200 with RateLimit fields", w.Code, w.Header())
	}
	if got := inFlight(t, c, l.Resources()[0], recipes.LLMKey("bob", "gpt-5")); got != 300 {
		t.Fatalf("tokens held after a call that used 300: %d, want 300", got)
	}
	if w := do("bob", "9800"); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("a call of up to 9800 with 9700 left = %d %v, want 429 with Retry-After", w.Code, w.Header())
	}
	if w := do("", "10"); w.Code != http.StatusBadRequest {
		t.Fatalf("a call with no user = %d, want 400", w.Code)
	}
}
