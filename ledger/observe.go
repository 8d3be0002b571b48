package ledger

import (
	"time"
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
