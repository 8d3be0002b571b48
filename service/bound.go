package service

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
)

// Bound bounds the calls deciding at once: past it, a call fails at once
// with RESOURCE_EXHAUSTED (HTTP 503) instead of queueing behind a cluster
// that does not keep up. Protocols served side by side share one Bound, so
// that it bounds their calls together. A Bound is safe for concurrent use.
type Bound struct{ slots chan struct{} }

// NewBound returns a bound of n calls at once; n must be positive.
func NewBound(n int) (*Bound, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: a bound of %d calls at once: must be positive", ErrInvalidArgument, n)
	}
	return &Bound{slots: make(chan struct{}, n)}, nil
}

// Enter takes a place for a call, and returns what gives it back; when
// every place is taken, it returns a RESOURCE_EXHAUSTED status instead.
func (b *Bound) Enter() (leave func(), err error) {
	select {
	case b.slots <- struct{}{}:
		return func() { <-b.slots }, nil
	default:
		return nil, Errorf(codes.ResourceExhausted, ReasonOverloaded, "%d calls already deciding", cap(b.slots))
	}
}

// Len is how many calls are deciding now; Cap how many may at once.
func (b *Bound) Len() int { return len(b.slots) }

// Cap is how many calls may decide at once.
func (b *Bound) Cap() int { return cap(b.slots) }

// Drain waits until no call is deciding, taking every place for a moment
// (new calls are refused meanwhile).
func (b *Bound) Drain() {
	for range cap(b.slots) {
		b.slots <- struct{}{}
	}
	for range cap(b.slots) {
		<-b.slots
	}
}

// AnswerBefore bounds a call so that it ends before the caller's deadline,
// by a fifth of the time left (at most 100 ms): a cluster that does not
// answer is then reported (UNAVAILABLE, or what the service's policy
// answers) while the caller still listens, as Envoy's failure_mode_deny
// expects. A call without a deadline is not bounded.
func AnswerBefore(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	left := time.Until(dl)
	return context.WithDeadline(ctx, dl.Add(-min(left/5, 100*time.Millisecond)))
}
