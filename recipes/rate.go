package recipes

import (
	"context"

	"github.com/tblimit/tblimit/ledger"
)

// RequestRate admits at most N requests per window for each user: every
// admitted request is one unit held for one window.
//
// A RequestRate is safe for concurrent use. Most callers want Allow.
type RequestRate struct{ recipe }

// NewRequestRate returns a request rate limiter with the default limit l.
// It does no I/O: call Create once to create its ledger accounts.
func NewRequestRate(c *ledger.Client, cfg Config, l Limit) (*RequestRate, error) {
	base, err := newRecipe(c, cfg, Requests, l, 0)
	if err != nil {
		return nil, err
	}
	return &RequestRate{base}, nil
}

// Allow is shorthand for AllowN(ctx, key, 1).
func (r *RequestRate) Allow(ctx context.Context, key string) (Result, error) {
	return r.allowN(ctx, key, 1)
}

// AllowN reports whether n requests of user key may happen now, and takes
// them if so. A denial is a Result with Allowed false, not an error; its
// one PolicyResult is the limit's decision.
func (r *RequestRate) AllowN(ctx context.Context, key string, n uint64) (Result, error) {
	return r.allowN(ctx, key, n)
}

// Wait is shorthand for WaitN(ctx, key, 1).
func (r *RequestRate) Wait(ctx context.Context, key string) (Result, error) {
	return r.WaitN(ctx, key, 1)
}

// WaitN blocks until n requests of user key are admitted, or ctx ends, as
// Limiter.WaitN does: each try is a decision; it returns at once with
// ErrWouldExceedDeadline when ctx's deadline comes before the units
// return, and ErrExceedsLimit when n is more than the whole limit.
func (r *RequestRate) WaitN(ctx context.Context, key string, n uint64) (Result, error) {
	return r.waitN(ctx, key, n)
}
