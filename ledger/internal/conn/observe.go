package conn

import (
	"context"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Request is one request a Conn sent, as its observer is told of it.
type Request struct {
	Op      string // create_transfers, create_accounts, lookup_accounts, lookup_transfers, get_account_transfers, query_accounts or query_transfers
	Events  int    // events sent: transfers, accounts, IDs, or 1 filter
	Results int    // results answered
	Failed  int    // of a create, the events the cluster did not create (neither created nor existing)
	Start   time.Time
	Took    time.Duration
	Err     error // the request failed (no answer, or refused whole)
}

// SetObserver has observe told of every create, lookup and query request
// when it returns, with the context of the call that sent it: on the
// goroutine that sent it, which may be after that call gave up waiting.
// observe must be quick and safe for concurrent use. Set it before use.
func (c *Conn) SetObserver(observe func(context.Context, Request)) { c.observe = observe }

// observed is f, a request of op carrying events, told to c's observer
// when it returns (f itself without one). Each attempt is a request of its
// own: one sent again after an eviction, or refused as too large, is told
// twice.
func observed[R any](ctx context.Context, c *Conn, op string, events int, f func() ([]R, error)) func() ([]R, error) {
	if c.observe == nil {
		return f
	}
	return func() ([]R, error) {
		start := time.Now()
		res, err := f()
		r := Request{Op: op, Events: events, Results: len(res), Start: start, Took: time.Since(start), Err: tbError(err)}
		switch rs := any(res).(type) {
		case []tb.CreateTransferResult:
			for _, x := range rs {
				if x.Status != tb.TransferCreated && x.Status != tb.TransferExists {
					r.Failed++
				}
			}
		case []tb.CreateAccountResult:
			for _, x := range rs {
				if x.Status != tb.AccountCreated && x.Status != tb.AccountExists {
					r.Failed++
				}
			}
		}
		c.observe(ctx, r)
		return res, err
	}
}
