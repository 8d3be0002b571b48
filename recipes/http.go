package recipes

import (
	"cmp"
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// Allower is a limiter an HTTP middleware can ask: RequestRate, Bandwidth
// and Limiter are Allowers, and so is a rate limit service's client
// (service/ratelimit's Limiter). The Result's policies are the RateLimit
// fields the middleware writes.
type Allower interface {
	AllowN(ctx context.Context, key string, n uint64) (Result, error)
}

// KeyFunc picks the user key of a request (an API key, a client address).
// An empty key is a bad request.
type KeyFunc func(*http.Request) string

// CostFunc says how many units a request takes; nil means 1.
type CostFunc func(*http.Request) uint64

// Middleware limits an HTTP handler with l. Every decided response
// carries the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-10 (see StackMiddleware), and, for
// clients of earlier drafts, RateLimit-Limit, RateLimit-Remaining and
// RateLimit-Reset (reset in whole seconds, rounded up). A denied request
// gets 429 Too Many Requests with Retry-After, or 413 when its cost is
// more than a bytes limit's whole limit, and next is not called. A request
// without a key gets 400. When the cluster is unavailable, a Client whose
// OnUnavailable fails open (ledger.FailOpen) lets the request go ahead
// with no RateLimit field, since nothing is known of the limit; otherwise
// (it returns errors, or denies: ledger.FailClosed) the response is 503
// with Retry-After: 1 and no RateLimit fields.
func Middleware(l Allower, key KeyFunc, cost CostFunc) func(http.Handler) http.Handler {
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
			res, err := l.AllowN(r.Context(), k, n)
			if err == nil && !res.Allowed && res.Reason == ledger.Unavailable {
				err = ledger.ErrUnavailable // denied by ledger.FailClosed: not the client's doing
			}
			if err != nil {
				httpError(w, err)
				return
			}
			h := w.Header()
			if res.Reason != ledger.Unavailable { // failing open, nothing is known of the limit
				h.Set("RateLimit-Limit", strconv.FormatUint(res.Limit, 10))
				h.Set("RateLimit-Remaining", strconv.FormatUint(res.Remaining, 10))
				h.Set("RateLimit-Reset", seconds(res.ResetAfter))
			}
			writeRateLimit(h, res)
			if !res.Allowed {
				deny(w, res)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// RequestCost is StackMiddleware's default cost: one request, and its
// Content-Length in bytes. A body of unknown length (chunked) counts 0
// bytes here, and StackMiddleware with this default refuses it (411)
// where a policy counts content bytes; give a cost function of your own
// to count it otherwise.
func RequestCost(r *http.Request) Cost {
	return Cost{Requests: 1, Bytes: uint64(max(r.ContentLength, 0))}
}

// StackMiddleware limits an HTTP handler with s, decided on each request's
// cost (nil: RequestCost). Every response that was decided reports each
// enforcing policy (policies in shadow mode are not advertised, so that
// trying one out does not change how clients behave) with the fields of
// draft-ietf-httpapi-ratelimit-headers-10, as RFC 9651 lists:
//
//	RateLimit-Policy: "api-1s";q=10;w=1, "api-1m";q=100;w=60, "upload";q=1000000;qu="content-bytes";w=60
//	RateLimit: "api-1s";r=9;t=1, "api-1m";r=99;t=60, "upload";r=999000;t=60
//
// q is the key's limit (its plan's), w the window in seconds, r what is
// left after this request, t the seconds until more of it returns: for a
// policy that refused, until the same cost fits; for the others, until all
// of it has returned (a sliding window log returns units one by one, so
// some may return sooner), but never later than Retry-After on a denied
// request. A policy the cost takes nothing of (no content bytes) is in
// RateLimit-Policy only.
//
// A denied request gets 429 Too Many Requests with Retry-After (when all
// denying policies admit again), or 413 Content Too Large when its content
// exceeds a bytes policy's whole limit; next is not called. A request whose
// key is empty or malformed gets 400 Bad Request, and an unknown key on a
// policy that is not Lazy 403 Forbidden, unless the layer is in shadow
// mode: it is then left out of the decision (see Stack.AllowCost). When the cluster is unavailable
// the response is 503 Service Unavailable with Retry-After: 1, unless the
// stack (WithUnavailable(ledger.FailOpen)) or the ledger.Client
// (ledger.WithUnavailable(ledger.FailOpen)) fails open, in which case the
// request goes ahead without RateLimit fields.
//
// The handler finds the Result with ResultOf. Options change what a
// denial or an error answers (OnDenied, OnError) and which requests are
// not limited at all (Exempt).
func StackMiddleware(s *Stack[*http.Request], cost func(*http.Request) Cost, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	// With the default cost, a body of unknown length (chunked) cannot be
	// counted before it is read: where a policy counts content bytes, it
	// is refused with 411 Length Required rather than let through uncounted.
	needLength := false
	if cost == nil {
		cost = RequestCost
		for _, ly := range s.layers {
			for _, p := range ly.Limiter.policies {
				needLength = needLength || p.Unit == ContentBytes
			}
		}
	}
	o := middlewareOptions{denied: func(w http.ResponseWriter, _ *http.Request, res Result) { deny(w, res) },
		failed: func(w http.ResponseWriter, _ *http.Request, err error) { httpError(w, err) }}
	for _, opt := range opts {
		opt(&o)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if o.exempt != nil && o.exempt(r) {
				next.ServeHTTP(w, r)
				return
			}
			if needLength && r.ContentLength < 0 {
				http.Error(w, "a body of unknown length cannot be counted against a bytes limit: send Content-Length", http.StatusLengthRequired)
				return
			}
			res, err := s.AllowCost(r.Context(), r, cost(r))
			if err != nil {
				o.failed(w, r, err)
				return
			}
			writeRateLimit(w.Header(), res)
			switch {
			case res.Allowed:
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), resultKey{}, res)))
			case res.Reason == ledger.Unavailable:
				o.failed(w, r, ledger.ErrUnavailable)
			default:
				o.denied(w, r, res)
			}
		})
	}
}

// MiddlewareOption changes what StackMiddleware does.
type MiddlewareOption func(*middlewareOptions)

type middlewareOptions struct {
	denied func(http.ResponseWriter, *http.Request, Result)
	failed func(http.ResponseWriter, *http.Request, error)
	exempt func(*http.Request) bool
}

// OnDenied answers a denied request with f instead of 429 (or 413), such
// as a JSON body of the API's own. The response's RateLimit fields are set
// already; Result.RetryAfter says when to come back.
func OnDenied(f func(w http.ResponseWriter, r *http.Request, res Result)) MiddlewareOption {
	return func(o *middlewareOptions) { o.denied = f }
}

// OnError answers a request whose decision failed with f instead of the
// default (400 for a malformed key or cost, 403 for a key unknown to a
// policy that is not Lazy, 503 when the cluster is unavailable).
func OnError(f func(w http.ResponseWriter, r *http.Request, err error)) MiddlewareOption {
	return func(o *middlewareOptions) { o.failed = f }
}

// Exempt lets the requests f picks (health checks, an operator's keys) go
// ahead without a decision: nothing is taken, and no RateLimit field is
// written.
func Exempt(f func(*http.Request) bool) MiddlewareOption {
	return func(o *middlewareOptions) { o.exempt = f }
}

type resultKey struct{}

// ResultOf returns the Result that StackMiddleware admitted r with, for a
// handler that reports it or decides more (false outside the middleware,
// or for an exempt request).
func ResultOf(r *http.Request) (Result, bool) {
	res, ok := r.Context().Value(resultKey{}).(Result)
	return res, ok
}

// Deny answers a request that res denied as StackMiddleware does: it adds
// res's RateLimit-Policy and RateLimit fields (to any the response has),
// then Retry-After and 429 Too Many Requests, or 413 Content Too Large
// when the content exceeds a bytes policy's whole limit. For a handler
// that decides for itself (its keys are in the body, say).
func Deny(w http.ResponseWriter, res Result) {
	writeRateLimit(w.Header(), res)
	deny(w, res)
}

// deny answers a request that res denied: 413 when its content is more
// than a bytes policy's whole limit (waiting would not help, whatever else
// denied it), else 429.
func deny(w http.ResponseWriter, res Result) {
	for _, p := range res.Policies() {
		if !p.Shadow && p.Unit == ContentBytes && p.Decision.Reason == ledger.LimitExceeded && p.Decision.RetryAfter < 0 {
			http.Error(w, "content larger than the limit", http.StatusRequestEntityTooLarge)
			return
		}
	}
	if res.RetryAfter >= 0 {
		w.Header().Set("Retry-After", seconds(res.RetryAfter))
	}
	http.Error(w, "too many requests", http.StatusTooManyRequests)
}

// httpError answers a request whose decision failed: the caller's bad
// input is a 4xx, only an unavailable cluster is a 503. Messages name no
// key: a key may be a secret, such as an API key.
func httpError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ledger.ErrInvalidKey), errors.Is(err, ledger.ErrInvalidAmount):
		http.Error(w, "missing or malformed rate-limit key or cost", http.StatusBadRequest)
	case errors.Is(err, ledger.ErrUnknownUser):
		http.Error(w, "unknown client", http.StatusForbidden)
	case errors.Is(err, ledger.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
	default:
		http.Error(w, "rate limiter error", http.StatusInternalServerError)
	}
}

// ConcurrencyMiddleware limits how many requests of each key are in flight
// at once: a slot is reserved before next is called and given back as soon
// as it returns (or panics). A process that dies holding slots never gives
// them back; they return when the Concurrency's lease ends. A handler that
// runs longer than the lease loses its slot then, and the key may have
// more requests in flight than the limit. Responses carry the RateLimit
// fields with qu="concurrent-requests" and no window; a request over the
// limit gets 429 with Retry-After (when the oldest slot's lease ends at
// the latest), a request without a key 400, and an unavailable cluster 503.
func ConcurrencyMiddleware(c *Concurrency, key KeyFunc) func(http.Handler) http.Handler {
	name := c.Resource().Name
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rv, err := c.Start(r.Context(), key(r))
			if rv != nil && !rv.OK() && rv.Decision().Reason == ledger.Unavailable {
				// The cluster may still make the hold: give it back then,
				// without keeping the client waiting.
				go func() { _ = rv.Cancel(context.WithoutCancel(r.Context())) }()
				err = cmp.Or(err, ledger.ErrUnavailable)
			}
			if err != nil {
				httpError(w, err)
				return
			}
			d := rv.Decision()
			res := NewResult(d.Allowed, d.Reason, []PolicyResult{{Policy: name, Unit: ConcurrentRequests, Amount: 1, Decision: d}})
			writeRateLimit(w.Header(), res)
			if !res.Allowed {
				deny(w, res)
				return
			}
			// Given back even when the request's context is cancelled; if
			// the cluster does not answer, the lease returns the slot.
			defer func() { _ = rv.Cancel(context.WithoutCancel(r.Context())) }()
			next.ServeHTTP(w, r)
		})
	}
}

// seconds formats d in whole seconds, rounded up.
func seconds(d time.Duration) string {
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10)
}

// Middleware limits an HTTP handler with l alone, keyed by key: a Stack of
// one layer under StackMiddleware, with the same cost function (nil:
// RequestCost), fields and statuses. The package's Middleware is the same
// for the single-limit recipes (RequestRate, Bandwidth).
func (l *Limiter) Middleware(key KeyFunc, cost func(*http.Request) Cost, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	s := &Stack[*http.Request]{d: newDecider(l.d.c, l.d.name, l.d.options), layers: []Layer[*http.Request]{{Limiter: l, Key: key}}}
	return StackMiddleware(s, cost, opts...)
}
