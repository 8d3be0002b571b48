package ledger

import (
	"context"
	"time"

	"github.com/tblimit/tblimit/ledger/internal/conn"
	"github.com/tblimit/tblimit/ledger/internal/pipeline"
)

// Observer is told of every decision a Client makes, whoever asked for it
// (the limiters of package recipes included), resource by resource: one
// DecisionEvent per resource decided, so that a chain of several parts
// (AcquireAll) makes one event per part. A recipes.Observer sees the
// decisions of recipes' Limiters and Stacks instead, one event for all
// their policies. For metrics (package recipes/metrics has a Prometheus
// collector) or tracing. ObserveDecision is called on the deciding
// goroutine once the decision is made: it must be quick and safe for
// concurrent use. What the Client sent is in Stats.
type Observer interface {
	ObserveDecision(DecisionEvent)
}

// DecisionEvent is one decision on one resource, as an Observer sees it: a
// chain of several parts (AcquireAll) makes one event per part.
type DecisionEvent struct {
	// Resource is the limit decided on.
	Resource Resource
	// Decision is the answer (when Err is not nil, what the Client's OnUnavailable
	// made of it, or the zero Decision).
	Decision Decision
	// Err is the error the call returned, if any.
	Err error
	// Took is how long the call took.
	Took time.Duration
}

// WithObserver has o told of every decision (Acquire, AcquireAll, Pay and
// Reserve).
func WithObserver(o Observer) Option { return func(c *Client) { c.observer = o } }

// observeStart is when a decision starts, for its Observer's Took (the
// zero Time, without reading the clock, when there is no Observer).
func (c *Client) observeStart() time.Time {
	if c.observer == nil {
		return time.Time{}
	}
	return time.Now()
}

// observe tells the Client's Observer of decisions ds about parts, made
// since start.
func (c *Client) observe(start time.Time, parts []Part, ds []Decision, err error) {
	if c.observer == nil {
		return
	}
	took := time.Since(start)
	for i, h := range parts {
		var d Decision
		if i < len(ds) {
			d = ds[i]
		}
		c.observer.ObserveDecision(DecisionEvent{Resource: h.Resource, Decision: d, Err: err, Took: took})
	}
}

// RequestObserver is told of every request a Client sends to TigerBeetle
// (creates, lookups and queries), when its answer comes: for tracing, a
// span per request. ObserveRequest is called on the goroutine that sent
// the request: it must be quick and safe for concurrent use.
type RequestObserver interface {
	ObserveRequest(RequestEvent)
}

// RequestEvent is one request to TigerBeetle, as a RequestObserver sees it.
type RequestEvent struct {
	// Operation is TigerBeetle's name for it: create_transfers,
	// create_accounts, lookup_accounts, lookup_transfers,
	// get_account_transfers, query_accounts or query_transfers.
	Operation string
	// Events is how many events it carried: transfers, accounts, IDs, or
	// one filter.
	Events int
	// Results is how many results the answer held; Failed, of a create,
	// how many events the cluster did not create (a limit's denial is
	// one: exceeds_credits).
	Results, Failed int
	// Start is when it was sent; Took, how long its answer took.
	Start time.Time
	Took  time.Duration
	// Err is why it failed, if it did (no answer, or refused whole).
	Err error
	// Calls are the contexts of the calls it served: every call of a
	// batch of decisions or checks (concurrent calls share one request),
	// or the one call that made it; none for the Client's own reads
	// between batches (refreshing its views of users). A call may have
	// stopped waiting before the answer came.
	Calls []context.Context
}

// WithRequestObserver has o told of every request the Client sends to
// TigerBeetle.
func WithRequestObserver(o RequestObserver) Option {
	return func(c *Client) {
		c.requests = o
		c.conn.SetObserver(func(ctx context.Context, r conn.Request) {
			calls, ok := pipeline.Calls(ctx)
			if !ok {
				calls = []context.Context{ctx} // a call's own request
			}
			o.ObserveRequest(RequestEvent{Operation: r.Op, Events: r.Events, Results: r.Results, Failed: r.Failed,
				Start: r.Start, Took: r.Took, Err: r.Err, Calls: calls})
		})
	}
}

// ownRead is the context of a read of the Client's own, serving no call.
func (c *Client) ownRead() context.Context {
	if c.requests == nil {
		return context.Background()
	}
	return pipeline.WithCalls(context.Background(), []context.Context{})
}
