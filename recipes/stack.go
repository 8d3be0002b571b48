package recipes

import (
	"context"
	"fmt"

	"github.com/tblimit/tblimit/ledger"
)

// Layer is one Limiter of a Stack and how a request of type T names its
// key there: a constant for a global limit, the customer for a limit per
// customer, customer and route for a limit per route.
type Layer[T any] struct {
	Limiter *Limiter
	Key     func(T) string
}

// Stack combines limiters (global, per customer, per route...) into one
// decision: the policies of every layer, each for the key the layer
// names, decided as one linked chain, all-or-nothing. A denial by any
// policy takes nothing from any of them.
//
// T is what a request is to the caller: *http.Request for the HTTP
// middleware (see StackMiddleware), or an application's own type, such as
// a payment. A Stack is safe for concurrent use.
type Stack[T any] struct {
	d      decider
	layers []Layer[T]
}

// NewStack returns a stack named name of layers, decided in their order.
// Every Limiter must be on the same ledger.Client, and every policy name
// must be unique in the stack. With Shadow, every policy is in shadow mode;
// a Limiter built with Shadow is in shadow mode in the stack too. A
// Limiter's own WithUnavailable and observer do not apply in the stack:
// give the stack its own.
func NewStack[T any](name string, layers []Layer[T], opts ...Option) (*Stack[T], error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case name == "":
		return nil, fmt.Errorf("%w: a stack needs a name", ledger.ErrInvalidResource)
	case len(layers) == 0:
		return nil, fmt.Errorf("%w: stack %q has no layer", ledger.ErrInvalidResource, name)
	case o.plans != nil:
		return nil, fmt.Errorf("%w: stack %q: plans belong to each Limiter (WithPlans on NewLimiter)", ledger.ErrInvalidResource, name)
	}
	names := map[string]bool{}
	ledgers := map[uint32]ledger.Resource{}
	for i, ly := range layers {
		if ly.Limiter == nil || ly.Key == nil {
			return nil, fmt.Errorf("%w: stack %q: layer %d needs a Limiter and a Key", ledger.ErrInvalidResource, name, i)
		}
		if ly.Limiter.d.c != layers[0].Limiter.d.c {
			return nil, fmt.Errorf("%w: stack %q: limiter %q is on another ledger.Client (one chain needs one Client)", ledger.ErrInvalidResource, name, ly.Limiter.Name())
		}
		for j, p := range ly.Limiter.policies {
			r := ly.Limiter.res[j]
			if prev, ok := ledgers[r.Ledger]; names[p.Name] || ok && prev != r {
				return nil, fmt.Errorf("%w: stack %q: policy %q (ledger %d) appears twice", ledger.ErrInvalidResource, name, p.Name, r.Ledger)
			}
			names[p.Name], ledgers[r.Ledger] = true, r
		}
	}
	return &Stack[T]{d: newDecider(layers[0].Limiter.d.c, name, o), layers: append([]Layer[T](nil), layers...)}, nil
}

// Name returns the stack's name.
func (s *Stack[T]) Name() string { return s.d.name }

// Layers returns the stack's layers.
func (s *Stack[T]) Layers() []Layer[T] { return append([]Layer[T](nil), s.layers...) }

// Create creates the ledger accounts of every layer's policies (see
// Limiter.Create).
func (s *Stack[T]) Create(ctx context.Context) error {
	for _, ly := range s.layers {
		if err := ly.Limiter.Create(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Allow is shorthand for AllowCost(ctx, in, Cost{Requests: 1}).
func (s *Stack[T]) Allow(ctx context.Context, in T) (Result, error) {
	return s.AllowCost(ctx, in, Cost{Requests: 1})
}

// AllowCost reports whether request in may take cost now from every
// policy of every layer, and takes it if so: one create request for the
// whole stack. A layer's key that is empty or malformed is an error
// wrapping ledger.ErrInvalidKey: the caller's bad input, not an outage;
// unless the layer is in shadow mode (its Limiter's, or the whole
// stack's), which never fails a request: its policies are then left out
// of the decision, named in Result.ShadowFailed.
func (s *Stack[T]) AllowCost(ctx context.Context, in T, cost Cost) (Result, error) {
	return s.d.decide(ctx, s.members(in, cost))
}

// Wait is shorthand for WaitCost(ctx, in, Cost{Requests: 1}).
func (s *Stack[T]) Wait(ctx context.Context, in T) (Result, error) {
	return s.WaitCost(ctx, in, Cost{Requests: 1})
}

// WaitCost blocks until request in is admitted cost, or ctx ends; see
// Limiter.WaitCost.
func (s *Stack[T]) WaitCost(ctx context.Context, in T, cost Cost) (Result, error) {
	return s.d.wait(ctx, s.members(in, cost))
}

// Peek reports what request in's keys have left on every policy, taking
// nothing; see Limiter.Peek for its cost and exactness.
func (s *Stack[T]) Peek(ctx context.Context, in T) ([]PolicyUsage, error) {
	return s.d.peek(ctx, s.members(in, Cost{}))
}

func (s *Stack[T]) members(in T, cost Cost) []member {
	ms := make([]member, len(s.layers))
	for i, ly := range s.layers {
		ms[i] = member{l: ly.Limiter, key: ly.Key(in), cost: cost}
	}
	return ms
}
