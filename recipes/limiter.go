package recipes

import (
	"context"
	"errors"
	"fmt"

	"github.com/tblimit/tblimit/ledger"
)

// Limiter applies several policies to each key at once, e.g. 10 requests
// per second and 100 per minute and 1 MB per minute: every decision is one
// linked chain of holds, one per policy on its own ledger, that TigerBeetle
// applies all-or-nothing, so that a denial by any policy takes nothing from
// the others. Limiters combine into a Stack.
//
// A Limiter is safe for concurrent use. Most callers want Allow, or a
// Stack and its HTTP middleware.
type Limiter struct {
	d        decider
	policies []Policy
	res      []ledger.Resource
	plans    *Plans
	shadow   bool
}

// Option configures a Limiter or a Stack.
type Option func(*options)

type options struct {
	shadow        bool
	onUnavailable *ledger.OnUnavailable // nil: the ledger.Client's decides
	observer      Observer
	plans         *Plans
}

// Shadow puts a Limiter, or a whole Stack, in shadow mode: it decides and
// records as usual, but never denies. A policy in shadow mode that would
// deny is named in Result.ShadowDenied and left out of the chain, which is
// decided again without it, so that the enforcing policies decide as if it
// were not there.
func Shadow() Option { return func(o *options) { o.shadow = true } }

// WithUnavailable sets what the decisions of a Limiter, a Stack or a Group
// return while the cluster is unavailable, whatever the ledger.Client's own
// OnUnavailable (ledger.WithUnavailable): ledger.ReturnError returns an
// error wrapping ledger.ErrUnavailable; ledger.FailOpen admits and
// ledger.FailClosed denies, both with Result.Reason Unavailable and no
// error. Without it, the Client's OnUnavailable decides. Any other value
// panics, as a programming error, when the Limiter, Stack or Group is
// built.
func WithUnavailable(p ledger.OnUnavailable) Option {
	return func(o *options) {
		switch p {
		case ledger.ReturnError, ledger.FailOpen, ledger.FailClosed:
			o.onUnavailable = &p
		default:
			panic(fmt.Sprintf("recipes: WithUnavailable(%v): want ledger.ReturnError, ledger.FailOpen or ledger.FailClosed", p))
		}
	}
}

// WithObserver has o told of every decision of the Limiter or Stack.
func WithObserver(o Observer) Option { return func(opts *options) { opts.observer = o } }

// WithPlans chooses each key's limits at decision time (see Plans). It
// applies to a Limiter, not to a Stack: each Limiter of a Stack keeps its
// own plans.
func WithPlans(p *Plans) Option { return func(o *options) { o.plans = p } }

// NewLimiter returns a limiter named name (in metrics and errors) of
// policies on c. It does no I/O: call Create once.
func NewLimiter(c *ledger.Client, name string, policies []Policy, opts ...Option) (*Limiter, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: a limiter needs a name", ledger.ErrInvalidResource)
	}
	if len(policies) == 0 {
		return nil, fmt.Errorf("%w: limiter %q has no policy", ledger.ErrInvalidResource, name)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	l := &Limiter{d: newDecider(c, name, o), policies: append([]Policy(nil), policies...), plans: o.plans, shadow: o.shadow}
	names, ledgers := map[string]bool{}, map[uint32]bool{}
	for i := range l.policies {
		if err := l.policies[i].countsWhatItsLimitSays(); err != nil {
			return nil, err
		}
	}
	for _, p := range l.policies {
		r, err := p.resource()
		if err != nil {
			return nil, err
		}
		if names[p.Name] || ledgers[p.Ledger] {
			return nil, fmt.Errorf("%w: limiter %q: policy %q: each policy needs a name and a ledger of its own", ledger.ErrInvalidResource, name, p.Name)
		}
		names[p.Name], ledgers[p.Ledger] = true, true
		l.res = append(l.res, r)
	}
	if o.plans != nil {
		if err := o.plans.check(name, policies); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Name returns the limiter's name.
func (l *Limiter) Name() string { return l.d.name }

// Policies returns the limiter's policies.
func (l *Limiter) Policies() []Policy { return append([]Policy(nil), l.policies...) }

// Resources returns the ledger resource of each policy, in order: what
// ledger.Client's Inspect, Flights and Audit take.
func (l *Limiter) Resources() []ledger.Resource { return append([]ledger.Resource(nil), l.res...) }

// Create creates the ledger accounts of every policy in the cluster. It is
// idempotent; it fails with ledger.ErrResourceMismatch if a ledger holds a
// different definition.
func (l *Limiter) Create(ctx context.Context) error {
	for _, r := range l.res {
		if err := l.d.c.CreateResource(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// Allow is shorthand for AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	return l.AllowCost(ctx, key, Cost{Requests: 1})
}

// AllowN is shorthand for AllowCost(ctx, key, Cost{Requests: n}): n
// requests, no content bytes.
func (l *Limiter) AllowN(ctx context.Context, key string, n uint64) (Result, error) {
	return l.AllowCost(ctx, key, Cost{Requests: n})
}

// AllowCost reports whether key may take cost now from every policy, and
// takes it if so: one create request, whatever the number of policies. An
// empty or malformed key is an error wrapping ledger.ErrInvalidKey, except
// in shadow mode, which never fails a request: the request is then
// admitted without a decision, its policies named in Result.ShadowFailed.
func (l *Limiter) AllowCost(ctx context.Context, key string, cost Cost) (Result, error) {
	return l.d.decide(ctx, l.members(key, cost))
}

// Wait is shorthand for WaitN(ctx, key, 1).
func (l *Limiter) Wait(ctx context.Context, key string) (Result, error) {
	return l.WaitCost(ctx, key, Cost{Requests: 1})
}

// WaitN is shorthand for WaitCost(ctx, key, Cost{Requests: n}).
func (l *Limiter) WaitN(ctx context.Context, key string, n uint64) (Result, error) {
	return l.WaitCost(ctx, key, Cost{Requests: n})
}

// WaitCost blocks until key is admitted cost, or ctx ends, like
// x/time/rate's WaitN. Each try is a decision; after a denial it sleeps
// until the Result's RetryAfter (at least 10ms, more when tries keep
// finding nothing returned) and tries again. It returns at once with an
// error wrapping ErrWouldExceedDeadline when ctx's deadline comes before
// RetryAfter, ErrExceedsLimit when the cost is more than a policy's whole
// limit, and ledger.ErrUnavailable when the cluster is unavailable.
func (l *Limiter) WaitCost(ctx context.Context, key string, cost Cost) (Result, error) {
	return l.d.wait(ctx, l.members(key, cost))
}

// Peek reports what key has left on every policy, taking nothing. It reads
// the cluster (see ledger.Client.Inspect): one account lookup per policy,
// and for a policy with units in flight two scans of the key's transfers,
// the policies read concurrently. The numbers are exact at the instant of
// each read, across processes. A key never seen on a Lazy policy shows its
// plan's limit, all available; a plan's new limit shows after the key's
// next decision. Reads leave no trace in the audit trail.
func (l *Limiter) Peek(ctx context.Context, key string) ([]PolicyUsage, error) {
	return l.d.peek(ctx, l.members(key, Cost{}))
}

// Reset gives back at once every unit key holds on every policy, as an
// operator's act that the audit trail shows: each hold in flight is voided
// (see ledger.Client.Reset). It returns how many holds it ended; a key a
// policy never saw has nothing to give back there.
func (l *Limiter) Reset(ctx context.Context, key string) (int, error) {
	ended := 0
	for _, r := range l.res {
		n, err := l.d.c.Reset(ctx, r, key)
		ended += n
		if err != nil && !errors.Is(err, ledger.ErrUnknownUser) {
			return ended, err
		}
	}
	return ended, nil
}

func (l *Limiter) members(key string, cost Cost) []member {
	return []member{{l: l, key: key, cost: cost}}
}
