package recipes

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Allower is a limiter an HTTP middleware can ask: RequestRate and
// Bandwidth are Allowers.
type Allower interface {
	AllowN(ctx context.Context, key string, n uint64) (Decision, error)
	Window() time.Duration
}

// KeyFunc picks the user key of a request (an API key, a client address).
// An empty key is a bad request.
type KeyFunc func(*http.Request) string

// CostFunc says how many units a request takes; nil means 1.
type CostFunc func(*http.Request) uint64

// Middleware limits an HTTP handler with l. Every response carries the
// RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset headers (reset in
// whole seconds, rounded up) and RateLimit-Policy ("10;w=60"); a denied
// request gets 429 Too Many Requests with Retry-After, and next is not
// called. When the limiter fails (the cluster is unavailable and the
// Client's policy returns errors), the response is 503 with Retry-After: 1.
func Middleware(l Allower, key KeyFunc, cost CostFunc) func(http.Handler) http.Handler {
	window := int64(l.Window() / time.Second)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k := key(r)
			if k == "" {
				http.Error(w, "no rate-limit key in the request", http.StatusBadRequest)
				return
			}
			n := uint64(1)
			if cost != nil {
				n = cost(r)
			}
			d, err := l.AllowN(r.Context(), k, n)
			if err != nil {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
				return
			}
			h := w.Header()
			h.Set("RateLimit-Limit", strconv.FormatUint(d.Limit, 10))
			h.Set("RateLimit-Remaining", strconv.FormatUint(d.Remaining, 10))
			h.Set("RateLimit-Reset", seconds(d.ResetAfter))
			h.Set("RateLimit-Policy", fmt.Sprintf("%d;w=%d", d.Limit, window))
			if !d.Allowed {
				if d.RetryAfter >= 0 {
					h.Set("Retry-After", seconds(d.RetryAfter))
				}
				http.Error(w, "too many requests", http.StatusTooManyRequests)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// seconds formats d in whole seconds, rounded up.
func seconds(d time.Duration) string {
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10)
}
