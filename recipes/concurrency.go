package recipes

import (
	"context"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// Concurrency admits at most N requests in flight at once for each user:
// Start reserves one unit, and the reservation's Cancel gives it back when
// the request ends. A unit whose holder never ends it (a crashed worker)
// returns after the lease.
//
// A Concurrency is safe for concurrent use. Most callers want Start.
type Concurrency struct{ recipe }

// NewConcurrency returns a limiter of n requests in flight per user, each
// held at most lease (whole seconds). It does no I/O: call Create once.
func NewConcurrency(c *ledger.Client, cfg Config, n uint64, lease time.Duration) (*Concurrency, error) {
	base, err := newRecipe(c, cfg, ConcurrentRequests, Per(n, lease), 0)
	if err != nil {
		return nil, err
	}
	return &Concurrency{base}, nil
}

// Start reserves a slot for user key. If r.OK(), the caller must end the
// request with r.Cancel (typically deferred); otherwise r.Decision() says
// how long until a slot is sure to be free (the lease of the oldest one).
func (c *Concurrency) Start(ctx context.Context, key string) (*ledger.Reservation, error) {
	return c.c.Reserve(ctx, c.res, ledger.Request{User: key, Amount: 1})
}
