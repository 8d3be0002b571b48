package recipes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// decider is what a Limiter and a Stack share: how their decisions are
// made. Every public path of both ends in decide (Allow, Wait) or peek.
type decider struct {
	name string
	c    *ledger.Client
	options
	sleep func(context.Context, time.Duration) error // sleepCtx; tests move a manual clock instead
}

func newDecider(c *ledger.Client, name string, o options) decider {
	return decider{name: name, c: c, options: o, sleep: sleepCtx}
}

// member is one limiter of a decision, the key it decides for, what it
// takes and, when not nil, the limits that override the key's plan.
type member struct {
	l      *Limiter
	key    string
	cost   Cost
	limits Plan
}

// decide decides members as one chain and tells the observer.
func (d *decider) decide(ctx context.Context, members []member) (Result, error) {
	start := time.Now()
	res, err := d.chain(ctx, members)
	if d.observer != nil {
		d.observer.ObserveResult(Event{Limiter: d.name, Result: res, Err: err, Took: time.Since(start)})
	}
	return res, err
}

// chain decides every policy of members that their cost takes units of, as one
// linked chain (AcquireAll). A round denied only by policies in shadow
// mode is decided again without them: they never deny, and the enforcing
// policies decide as if they were not there.
//
// We considered deciding shadow policies in a chain of their own, beside
// the enforcing one: one round always, but two chains, so that a shadow
// policy would take units when the enforcing ones deny. Leaving them out
// only when they refuse keeps one chain and the all-or-nothing record: the
// units a decision took are exactly those of the policies it admitted on.
func (d *decider) chain(ctx context.Context, members []member) (Result, error) {
	res, parts, err := prepare(ctx, members, d.shadow)
	if err != nil {
		return Result{}, err
	}
	dropped := make([]bool, len(parts))
	for {
		var idx []int
		for i, p := range res.Policies {
			if !p.Skipped() && !dropped[i] {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 { // every policy asked refused, in shadow mode
			res.Allowed, res.Reason = true, ledger.Admitted
			return res, nil
		}
		chain := make([]ledger.Part, len(idx))
		for k, i := range idx {
			chain[k] = parts[i]
		}
		ds, err := d.c.AcquireAll(ctx, chain)
		for k, i := range idx[:min(len(idx), len(ds))] {
			res.Policies[i].Decision = ds[k]
		}
		switch {
		case shadowUnknown(&res, parts, idx, dropped, err):
			continue // nothing was taken: decide again without it
		case err != nil && !errors.Is(err, ledger.ErrUnavailable):
			return res, err
		case err != nil || ds[0].Reason == ledger.Unavailable:
			return d.unavailable(res, idx, ds, err)
		case ds[0].Allowed:
			res.Allowed, res.Reason = true, ledger.Admitted
			return res, nil
		}
		if final := denied(&res, idx, dropped); final {
			return res, nil
		}
	}
}

// prepare validates the keys of members and returns the Result to fill in,
// one PolicyResult per policy, and the ledger.Part of each policy in the chain.
func prepare(ctx context.Context, members []member, shadow bool) (Result, []ledger.Part, error) {
	var res Result
	var parts []ledger.Part
	takes := false
	for _, m := range members {
		cost := m.cost
		key, err := ledger.NormalizeKey(m.key)
		inShadow := shadow || m.l.shadow
		switch {
		case err != nil && !inShadow:
			return Result{}, nil, fmt.Errorf("recipes: limiter %q: %w", m.l.Name(), err)
		case err != nil:
			// Left out, as a policy the cost takes nothing of is.
			for i, p := range m.l.policies {
				res.Policies = append(res.Policies, PolicyResult{Limiter: m.l.Name(), Policy: p.Name, Unit: p.Unit,
					Window: m.l.res[i].Window, Shadow: true})
				res.ShadowFailed = append(res.ShadowFailed, p.Name)
				parts = append(parts, ledger.Part{})
				takes = takes || cost.of(p.Unit) > 0
			}
			continue
		}
		override, plan := m.l.plans.of(ctx, key)
		for i, p := range m.l.policies {
			r := m.l.res[i]
			limit, amount := planned(override, plan, p.Name), cost.of(p.Unit)
			if n := m.limits[p.Name]; n != 0 {
				limit = n
			}
			pr := PolicyResult{Limiter: m.l.Name(), Policy: p.Name, Unit: p.Unit, Window: r.Window, Key: key,
				Amount: amount, Shadow: inShadow}
			pr.Decision.Limit = cmp.Or(limit, r.DefaultLimit)
			res.Policies = append(res.Policies, pr)
			parts = append(parts, ledger.Part{Resource: r, Request: ledger.Request{User: key, Amount: amount, Limit: limit}})
			takes = takes || amount > 0
		}
	}
	if !takes {
		return Result{}, nil, fmt.Errorf("%w: a cost of %d requests and %d bytes takes nothing from any policy", ledger.ErrInvalidAmount, members[0].cost.Requests, members[0].cost.Bytes)
	}
	return res, parts, nil
}

// denied reads a denied round of the policies idx: the shadow policies
// that refused are dropped (and named in ShadowDenied). It reports whether
// the denial is final, that is, whether an enforcing policy refused, and
// then fills in Reason, DeniedBy and RetryAfter.
func denied(res *Result, idx []int, dropped []bool) (final bool) {
	var enforcing []int
	droppedNow := false
	for _, i := range idx {
		p := res.Policies[i]
		switch {
		case p.Decision.Reason != ledger.LimitExceeded:
		case p.Shadow:
			dropped[i], droppedNow = true, true
			res.ShadowDenied = append(res.ShadowDenied, p.Policy)
		default:
			enforcing = append(enforcing, i)
		}
	}
	if len(enforcing) == 0 {
		if droppedNow {
			return false
		}
		enforcing = idx[:1] // refused without a policy saying so: the ledger's business; deny
	}
	res.Allowed, res.Reason = false, ledger.LimitExceeded
	res.DeniedBy = res.Policies[enforcing[0]].Policy
	for _, i := range enforcing {
		ra := res.Policies[i].Decision.RetryAfter
		if ra < 0 || res.RetryAfter < 0 {
			res.RetryAfter = -1
		} else {
			res.RetryAfter = max(res.RetryAfter, ra)
		}
	}
	return true
}

// shadowUnknown reports whether err says that the chain of the policies
// idx was refused for a user unknown to one of them in shadow mode; that
// policy is then dropped.
func shadowUnknown(res *Result, parts []ledger.Part, idx []int, dropped []bool, err error) bool {
	var unknown *ledger.UnknownUserError
	if !errors.As(err, &unknown) {
		return false
	}
	for _, i := range idx {
		pt := parts[i]
		if res.Policies[i].Shadow && pt.Resource.Ledger == unknown.Resource.Ledger && pt.Request.User == unknown.User {
			dropped[i] = true
			res.ShadowFailed = append(res.ShadowFailed, res.Policies[i].Policy)
			return true
		}
	}
	return false
}

// unavailable is the Result of a chain of the policies idx the cluster did
// not answer: the Client's OnUnavailable made ds (or returned err), unless
// WithUnavailable overrides it; a chain of policies in shadow mode only is
// admitted regardless.
func (d *decider) unavailable(res Result, idx []int, ds []ledger.Decision, err error) (Result, error) {
	res.Reason = ledger.Unavailable
	shadowOnly := true
	for _, i := range idx {
		shadowOnly = shadowOnly && res.Policies[i].Shadow
	}
	if shadowOnly {
		for _, i := range idx {
			res.ShadowFailed = append(res.ShadowFailed, res.Policies[i].Policy)
		}
		res.Allowed = true
		return res, nil
	}
	if d.onUnavailable == nil {
		if err != nil {
			return res, err
		}
		res.Allowed = ds[0].Allowed
		return res, nil
	}
	switch *d.onUnavailable {
	case ledger.FailOpen:
		res.Allowed = true
		return res, nil
	case ledger.FailClosed:
		res.Allowed = false
		return res, nil
	}
	if err == nil { // the Client decided, and this limiter returns the error instead
		err = fmt.Errorf("recipes: %s: %w", d.name, ledger.ErrUnavailable)
	}
	return res, err
}

// Wait's pause after a denial whose RetryAfter says nothing new (the
// cluster frees expired units a little late, and a view that lacks what
// other processes hold may say 0): it starts at minPause and doubles up to
// maxPause while tries keep finding nothing, so that Wait never spins.
const (
	minPause = 10 * time.Millisecond
	maxPause = 250 * time.Millisecond
)

// wait decides until members are admitted, sleeping until RetryAfter
// between tries.
func (d *decider) wait(ctx context.Context, members []member) (Result, error) {
	var res Result
	err := waitLoop(ctx, d.name, d.sleep, func() (refusal, error) {
		var err error
		res, err = d.decide(ctx, members)
		return refusal{admitted: res.Allowed, unavailable: res.Reason == ledger.Unavailable, retryAfter: res.RetryAfter, by: res.DeniedBy}, err
	})
	return res, err
}

// refusal is what a Wait's loop needs of a decision.
type refusal struct {
	admitted, unavailable bool
	retryAfter            time.Duration
	by                    string // the policy that refused, for errors
}

// waitLoop runs try until it admits, fails, or ctx ends: after a denial it
// sleeps until its RetryAfter (at least minPause, doubling up to maxPause
// while tries find nothing returned), and returns at once when waiting
// cannot help (the cost exceeds the whole limit, or ctx's deadline comes
// first). Every Wait of the recipes ends here.
func waitLoop(ctx context.Context, name string, sleep func(context.Context, time.Duration) error, try func() (refusal, error)) error {
	floor := minPause
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := try()
		switch {
		case err != nil || r.admitted:
			return err
		case r.unavailable:
			return fmt.Errorf("recipes: %s: %w (denied while it did not answer)", name, ledger.ErrUnavailable)
		case r.retryAfter < 0:
			return fmt.Errorf("%w: %s: policy %q", ErrExceedsLimit, name, r.by)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < r.retryAfter {
			return fmt.Errorf("%w: %s: policy %q admits in %v at the earliest", ErrWouldExceedDeadline, name, r.by, r.retryAfter)
		}
		pause := r.retryAfter
		if pause < floor {
			pause, floor = floor, min(2*floor, maxPause)
		} else {
			floor = minPause
		}
		if err := sleep(ctx, pause); err != nil {
			return err
		}
	}
}

// sleepCtx sleeps for d, or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// PolicyUsage is what a key has on one policy: see Peek.
type PolicyUsage struct {
	// Limiter and Policy name the limiter and the policy.
	Limiter, Policy string
	// Unit and Window are the policy's.
	Unit   Unit
	Window time.Duration
	// Key is the key read, in its normal form.
	Key string
	// Usage is the key's state on the policy.
	Usage
}

// peek reads what members' keys have on every policy, concurrently.
func (d *decider) peek(ctx context.Context, members []member) ([]PolicyUsage, error) {
	for _, m := range members { // a shadow limiter's bad key too: Peek decides nothing
		if _, err := ledger.NormalizeKey(m.key); err != nil {
			return nil, fmt.Errorf("recipes: limiter %q: %w", m.l.Name(), err)
		}
	}
	probe := make([]member, len(members))
	for i, m := range members {
		probe[i] = member{l: m.l, key: m.key, cost: Cost{Requests: 1, Bytes: 1}, limits: m.limits}
	}
	res, parts, err := prepare(ctx, probe, false)
	if err != nil {
		return nil, err
	}
	out := make([]PolicyUsage, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, pt := range parts {
		p := res.Policies[i]
		out[i] = PolicyUsage{Limiter: p.Limiter, Policy: p.Policy, Unit: p.Unit, Window: p.Window, Key: p.Key}
		wg.Go(func() {
			u, err := d.c.Inspect(ctx, pt.Resource, pt.Request.User)
			if errors.Is(err, ledger.ErrUnknownUser) && pt.Resource.Lazy {
				u, err = Usage{Limit: p.Decision.Limit, Available: p.Decision.Limit}, nil
			}
			out[i].Usage, errs[i] = u, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}
