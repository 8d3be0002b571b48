package recipes

import (
	"context"
	"fmt"

	"github.com/tblimit/tblimit/ledger"
)

// Member is one Limiter of a Group's decision: the key it decides for,
// what it takes and, when not nil, limits that override the key's plan for
// this decision (a rate limit service's configured limits, which can
// change with every reload).
type Member struct {
	Limiter *Limiter
	Key     string
	Cost    Cost
	Limits  Plan
}

// Group decides limiters chosen anew for each request as one linked chain,
// all-or-nothing, as a Stack does for a fixed list of layers: a rate limit
// service's descriptors, where each request names the limits it meets. A
// Limiter in shadow mode (Shadow) is in shadow mode in the group too.
//
// A Group is safe for concurrent use.
type Group struct {
	d decider
}

// NewGroup returns a group named name (in metrics and errors) deciding on
// c. Options are those of a Stack: Shadow, WithUnavailable and
// WithObserver apply to the whole group; plans belong to each Limiter.
func NewGroup(c *ledger.Client, name string, opts ...Option) (*Group, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case name == "":
		return nil, fmt.Errorf("%w: a group needs a name", ledger.ErrInvalidResource)
	case c == nil:
		return nil, fmt.Errorf("%w: group %q needs a ledger.Client", ledger.ErrInvalidResource, name)
	case o.plans != nil:
		return nil, fmt.Errorf("%w: group %q: plans belong to each Limiter (WithPlans on NewLimiter)", ledger.ErrInvalidResource, name)
	}
	return &Group{d: newDecider(c, name, o)}, nil
}

// Name returns the group's name.
func (g *Group) Name() string { return g.d.name }

// Allow decides members as one chain: every policy of every member that
// the member's cost takes units of, each for the member's key. A member may
// repeat a Limiter (two descriptors of one rule): the policies of both are
// in the chain. Result.Policies has one PolicyResult per policy of each
// member, in order.
// An empty or malformed key is an error wrapping ledger.ErrInvalidKey,
// unless the member is in shadow mode (its Limiter's, or the whole
// group's), which never fails a request: its policies are then left out
// of the decision, named in Result.ShadowFailed.
func (g *Group) Allow(ctx context.Context, members []Member) (Result, error) {
	if len(members) == 0 {
		return Result{}, fmt.Errorf("%w: group %q: a decision needs at least one member", ledger.ErrInvalidAmount, g.d.name)
	}
	ms := make([]member, len(members))
	for i, m := range members {
		if m.Limiter == nil {
			return Result{}, fmt.Errorf("%w: group %q: member %d has no Limiter", ledger.ErrInvalidResource, g.d.name, i)
		}
		if m.Limiter.d.c != g.d.c {
			return Result{}, fmt.Errorf("%w: group %q: limiter %q is on another ledger.Client (one chain needs one Client)", ledger.ErrInvalidResource, g.d.name, m.Limiter.Name())
		}
		ms[i] = member{l: m.Limiter, key: m.Key, cost: m.Cost, limits: m.Limits}
	}
	return g.d.decide(ctx, ms)
}
