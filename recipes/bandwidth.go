package recipes

import (
	"context"

	"github.com/tblimit/tblimit/ledger"
)

// Bandwidth admits at most N bytes per window for each user: a request of
// size bytes takes size units for one window. A request larger than what is
// left is denied while smaller ones may still fit.
//
// A Bandwidth is safe for concurrent use. Most callers want AllowN.
type Bandwidth struct{ recipe }

// NewBandwidth returns a bandwidth limiter with the default limit l, e.g.
// Bytes(10_000_000).Per(time.Minute). It does no I/O: call Create once.
func NewBandwidth(c *ledger.Client, cfg Config, l Limit) (*Bandwidth, error) {
	base, err := newRecipe(c, cfg, ContentBytes, l, 0)
	if err != nil {
		return nil, err
	}
	return &Bandwidth{base}, nil
}

// AllowN reports whether user key may transfer size bytes now, and takes
// them if so.
func (b *Bandwidth) AllowN(ctx context.Context, key string, size uint64) (Result, error) {
	return b.allowN(ctx, key, size)
}

// WaitN blocks until user key may transfer size bytes, or ctx ends (see
// RequestRate.WaitN).
func (b *Bandwidth) WaitN(ctx context.Context, key string, size uint64) (Result, error) {
	return b.waitN(ctx, key, size)
}
