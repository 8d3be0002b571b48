package ledger

import (
	"context"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Observer is told of every decision a Client makes, for metrics (package
// metrics has a Prometheus collector) or tracing. ObserveDecision is called
// on the deciding goroutine once the decision is made: it must be quick and
// safe for concurrent use. What the Client sent is in Stats.
type Observer interface {
	ObserveDecision(DecisionEvent)
}

// DecisionEvent is one decision, as an Observer sees it: a chain of several
// holds (AcquireAll) makes one event per hold.
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

// observe tells the Client's Observer of decisions ds about holds, made
// since start.
func (c *Client) observe(start time.Time, holds []Hold, ds []Decision, err error) {
	if c.observer == nil {
		return
	}
	took := time.Since(start)
	for i, h := range holds {
		var d Decision
		if i < len(ds) {
			d = ds[i]
		}
		c.observer.ObserveDecision(DecisionEvent{Resource: h.Resource, Decision: d, Err: err, Took: took})
	}
}

// Reset gives back at once every unit user key holds on r: it voids each
// hold in flight, as Reservation.Cancel does, so that the units are
// available again. It is an operator's act, and the audit trail shows it: a
// void per hold. It returns how many holds it ended. Units taken while it
// runs are not given back.
func (c *Client) Reset(ctx context.Context, r Resource, key string) (int, error) {
	uid, _, err := c.account(ctx, r, key)
	if err != nil {
		return 0, err
	}
	flights, err := c.inFlight(ctx, uid, maxTimeout(r.Window), c.clusterNow(), 0, true)
	if err != nil {
		return 0, err
	}
	key, _ = NormalizeKey(key) // c.account accepted it
	u := c.users.get(r, key)
	ended := 0
	for len(flights) > 0 {
		part := flights[:min(len(flights), maxLowerPosts)]
		flights = flights[len(part):]
		o := &op{}
		for _, f := range part {
			o.add(tb.Transfer{
				ID:              endID(roleCancel, f.id).tb(),
				PendingID:       f.id.tb(),
				DebitAccountID:  uid.tb(),
				CreditAccountID: OperatorID(r.Ledger).tb(),
				Ledger:          r.Ledger,
				Code:            f.code,
				Flags:           tb.TransferFlags{VoidPendingTransfer: true}.ToUint16(),
			}, u)
		}
		if err := c.submit(ctx, o); err != nil {
			return ended, err
		}
		for _, s := range o.res {
			if classifyEnd(s.Status) == endedNow { // else expired or ended meanwhile: nothing to give back
				ended++
			}
		}
	}
	return ended, nil
}
