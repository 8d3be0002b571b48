package recipes_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/recipes"
	"github.com/tblimit/tblimit/testenv"
)

func TestMiddleware(t *testing.T) {
	clock := embedded.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rl, err := recipes.NewRequestRate(ledger.New(embedded.New(embedded.WithClock(clock))), recipes.Config{Name: "http", Ledger: 1, Lazy: true}, recipes.PerMinute(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := 0
	h := recipes.Middleware(rl, func(r *http.Request) string { return r.Header.Get("X-Api-Key") }, nil)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls++ }))
	do := func(key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/", nil)
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i, want := range []struct {
		code      int
		remaining string
	}{{200, "1"}, {200, "0"}, {429, "0"}} {
		rec := do("k")
		if rec.Code != want.code || rec.Header().Get("RateLimit-Remaining") != want.remaining ||
			rec.Header().Get("RateLimit-Limit") != "2" || rec.Header().Get("RateLimit-Policy") != `"http";q=2;w=60` {
			t.Fatalf("request %d: %d %v, want %d with %s remaining", i+1, rec.Code, rec.Header(), want.code, want.remaining)
		}
		if want.code == 429 && rec.Header().Get("Retry-After") != "60" {
			t.Fatalf("429 without Retry-After 60: %v", rec.Header())
		}
	}
	if calls != 2 {
		t.Fatalf("handler called %d times, want 2", calls)
	}
	if rec := do(""); rec.Code != http.StatusBadRequest {
		t.Fatalf("no key: %d, want 400", rec.Code)
	}
	clock.Advance(time.Minute + time.Millisecond)
	if rec := do("k"); rec.Code != 200 {
		t.Fatalf("a minute later: %d", rec.Code)
	}
}

func TestConcurrency(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		lease := 2 * time.Second
		cl, err := recipes.NewConcurrency(ledger.New(b.Client), recipes.Config{Name: "conc", Ledger: b.NewLedger(), Lazy: true}, 2, lease)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Create(ctx); err != nil {
			t.Fatal(err)
		}
		r1, err := cl.Start(ctx, "w")
		if err != nil || !r1.OK() {
			t.Fatalf("Start #1 = %+v, %v", r1, err)
		}
		r2, err := cl.Start(ctx, "w")
		if err != nil || !r2.OK() {
			t.Fatalf("Start #2 = %+v, %v", r2, err)
		}
		r3, err := cl.Start(ctx, "w")
		if err != nil || r3.OK() || r3.Decision().Reason != ledger.LimitExceeded {
			t.Fatalf("Start #3 = %+v, %v; want denied", r3.Decision(), err)
		}
		if err := r3.Cancel(ctx); err != nil {
			t.Fatalf("Cancel of a denied reservation = %v", err)
		}
		// Ending a request frees its slot at once, and twice is harmless.
		for i := 0; i < 2; i++ {
			if err := r1.Cancel(ctx); err != nil {
				t.Fatal(err)
			}
		}
		r4, err := cl.Start(ctx, "w")
		if err != nil || !r4.OK() {
			t.Fatalf("Start after Cancel = %+v, %v", r4.Decision(), err)
		}
		if err := r4.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r4.Cancel(ctx); err == nil {
			t.Fatal("Cancel after Commit succeeded")
		}
		// A crashed holder's slot comes back after the lease: r2 was never ended.
		b.Advance(t, lease+time.Millisecond)
		if b.Real {
			time.Sleep(300 * time.Millisecond)
		}
		if err := r2.Commit(ctx); !errors.Is(err, ledger.ErrReservationExpired) {
			t.Fatalf("Commit after the lease = %v, want ErrReservationExpired", err)
		}
		u, err := cl.Inspect(ctx, "w")
		if err != nil || u.Limit != 2 || u.Available != 2 {
			t.Fatalf("Inspect = %+v, %v; want 2 of 2 (a committed slot is kept until its lease ends, no longer)", u, err)
		}
	})
}

// Middleware answers as StackMiddleware does: a cost over the whole limit
// of a bytes limit is 413 (waiting would not help), without Retry-After,
// with the same RateLimit fields.
func TestMiddlewareContentOverTheWholeLimit(t *testing.T) {
	bw, err := recipes.NewBandwidth(ledger.New(embedded.New()), recipes.Config{Name: "upload", Ledger: 1, Lazy: true}, recipes.PerMinute(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := bw.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := recipes.Middleware(bw, func(*http.Request) string { return "k" }, func(r *http.Request) uint64 { return uint64(r.ContentLength) })(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("handler called") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", 101))))
	if rec.Code != http.StatusRequestEntityTooLarge || rec.Header().Get("Retry-After") != "" {
		t.Fatalf("101 bytes against 100 a minute: %d %v, want 413 without Retry-After", rec.Code, rec.Header())
	}
	if got, want := rec.Header().Get("RateLimit-Policy"), `"upload";q=100;qu="content-bytes";w=60`; got != want {
		t.Errorf("RateLimit-Policy = %s, want %s", got, want)
	}
}
