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
	policies, parts, failed, err := prepare(ctx, members, d.shadow)
	if err != nil {
		return Result{}, err
	}
	dropped := make([]bool, len(parts))
	for {
		var idx []int
		for i, p := range policies {
			if !p.Skipped() && !dropped[i] {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 { // every policy asked was left out, in shadow mode
			return newResult(true, ledger.Admitted, policies, failed), nil
		}
		chain := make([]ledger.Part, len(idx))
		for k, i := range idx {
			chain[k] = parts[i]
		}
		ds, err := d.c.AcquireAll(ctx, chain)
		for k, i := range idx[:min(len(idx), len(ds))] {
			policies[i].Decision = ds[k]
		}
		if i, ok := shadowUnknown(policies, parts, idx, err); ok {
			dropped[i], failed = true, append(failed, policies[i].Policy)
			continue // nothing was taken: decide again without it
		}
		switch {
		case err != nil && !errors.Is(err, ledger.ErrUnavailable):
			return newResult(false, ledger.Undecided, policies, failed), err
		case err != nil || ds[0].Reason == ledger.Unavailable:
			return d.unavailable(policies, failed, idx, ds, err)
		case ds[0].Allowed:
			return newResult(true, ledger.Admitted, policies, failed), nil
		}
		if dropShadowRefusals(policies, idx, dropped) {
			continue // refused by policies in shadow mode only: decide again without them
		}
		return newResult(false, ledger.LimitExceeded, policies, failed), nil
	}
}

// prepare validates the keys of members and returns one PolicyResult per
// policy, the ledger.Part of each policy in the chain, and the names of
// the policies in shadow mode left out because their key is not valid.
func prepare(ctx context.Context, members []member, shadow bool) ([]PolicyResult, []ledger.Part, []string, error) {
	var policies []PolicyResult
	var parts []ledger.Part
	var failed []string
	takes := false
	for _, m := range members {
		cost := m.cost
		key, err := ledger.NormalizeKey(m.key)
		inShadow := shadow || m.l.shadow
		switch {
		case err != nil && !inShadow:
			return nil, nil, nil, fmt.Errorf("recipes: limiter %q: %w", m.l.Name(), err)
		case err != nil:
			// Left out, as a policy the cost takes nothing of is.
			for i, p := range m.l.policies {
				policies = append(policies, PolicyResult{Limiter: m.l.Name(), Policy: p.Name, Unit: p.Unit,
					Window: m.l.res[i].Window, Shadow: true})
				failed = append(failed, p.Name)
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
			policies = append(policies, PolicyResult{Limiter: m.l.Name(), Policy: p.Name, Unit: p.Unit, Window: r.Window,
				Key: key, Amount: amount, Shadow: inShadow, Decision: ledger.NotAsked(cmp.Or(limit, r.DefaultLimit))})
			parts = append(parts, ledger.Part{Resource: r, Request: ledger.Request{User: key, Amount: amount, Limit: limit}})
			takes = takes || amount > 0
		}
	}
	if !takes {
		return nil, nil, nil, fmt.Errorf("%w: a cost of %d requests and %d bytes takes nothing from any policy", ledger.ErrInvalidAmount, members[0].cost.Requests, members[0].cost.Bytes)
	}
	return policies, parts, failed, nil
}

// dropShadowRefusals drops the policies in shadow mode that refused in a
// denied round of the policies idx, and reports whether the round is to
// be decided again without them: no enforcing policy refused. A round
// refused without any policy saying so (the ledger's business) is final.
func dropShadowRefusals(policies []PolicyResult, idx []int, dropped []bool) (again bool) {
	enforcing := false
	for _, i := range idx {
		switch p := policies[i]; {
		case p.Decision.Reason != ledger.LimitExceeded:
		case p.Shadow:
			dropped[i], again = true, true
		default:
			enforcing = true
		}
	}
	return again && !enforcing
}

// shadowUnknown returns the policy in shadow mode of the chain of the
// policies idx that err says was refused for a user unknown to it, if
// any: nothing was taken, and the policy is to be dropped.
func shadowUnknown(policies []PolicyResult, parts []ledger.Part, idx []int, err error) (int, bool) {
	var unknown *ledger.UnknownUserError
	if !errors.As(err, &unknown) {
		return 0, false
	}
	for _, i := range idx {
		pt := parts[i]
		if policies[i].Shadow && pt.Resource.Ledger == unknown.Resource.Ledger && pt.Request.User == unknown.User {
			return i, true
		}
	}
	return 0, false
}

// unavailable is the Result of a chain of the policies idx the cluster did
// not answer: the Client's OnUnavailable made ds (or returned err), unless
// WithUnavailable overrides it; a chain of policies in shadow mode only is
// admitted regardless, and they are named in ShadowFailed.
func (d *decider) unavailable(policies []PolicyResult, failed []string, idx []int, ds []ledger.Decision, err error) (Result, error) {
	shadowOnly := true
	for _, i := range idx {
		shadowOnly = shadowOnly && policies[i].Shadow
	}
	if shadowOnly {
		for _, i := range idx {
			failed = append(failed, policies[i].Policy)
		}
		return newResult(true, ledger.Unavailable, policies, failed), nil
	}
	allowed, err := d.unanswered(ds, err)
	return newResult(allowed, ledger.Unavailable, policies, failed), err
}

// unanswered is what an unanswered chain comes to: whether it is admitted,
// or the error it returns. ds and err are what the Client's OnUnavailable
// made of it, which WithUnavailable overrides.
func (d *decider) unanswered(ds []ledger.Decision, err error) (bool, error) {
	if d.onUnavailable == nil {
		if err != nil {
			return false, err
		}
		return ds[0].Allowed, nil
	}
	switch *d.onUnavailable {
	case ledger.FailOpen:
		return true, nil
	case ledger.FailClosed:
		return false, nil
	}
	if err == nil { // the Client decided, and this limiter returns the error instead
		err = fmt.Errorf("recipes: %s: %w", d.name, ledger.ErrUnavailable)
	}
	return false, err
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
	policies, parts, _, err := prepare(ctx, probe, false)
	if err != nil {
		return nil, err
	}
	out := make([]PolicyUsage, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, pt := range parts {
		p := policies[i]
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
