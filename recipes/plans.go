package recipes

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"

	"github.com/tblimit/tblimit/ledger"
)

// Plan is a set of limits, by policy name: a key on the plan may take that
// many units per window of the policy. A policy the plan does not name, or
// names with 0, keeps its default Limit.
type Plan map[string]uint64

// Plans chooses each key's limits when it is decided: the limits of its
// plan (a tier such as "free" or "pro", picked by a function of the key and
// the request's context), with per-key overrides on top.
//
// A plan change takes effect with the key's next decision in each process:
// that decision first gives the key its new limit in the cluster (SetLimit,
// once however many callers race; see ledger.Request.Limit) and is then
// decided under it. Raising a limit admits more at once. Lowering takes
// back what is available at once and never lets any window hold more than
// the larger of the old and the new limit; once the units taken under the
// old limit have returned (one window), the new limit holds alone.
// Processes deciding for the same key must agree on its plan, or they
// set its limit back and forth.
//
// A key seen for the first time on a Lazy policy is created with its
// plan's limit, not the default. Plans is safe for concurrent use.
type Plans struct {
	tier  func(ctx context.Context, key string) string
	tiers map[string]Plan

	mu        sync.RWMutex
	overrides map[string]Plan // by normal key
	policies  map[string]bool // of the limiters given these plans; nil before any
}

// NewPlans returns the plans tiers, where tier names each key's plan: it
// is called with the key and the decision's context (which can carry the
// authenticated customer's subscription); a name that tiers lacks, and "",
// mean the policies' defaults. tier may be nil: only overrides then apply.
func NewPlans(tier func(ctx context.Context, key string) string, tiers map[string]Plan) *Plans {
	cp := make(map[string]Plan, len(tiers))
	for name, p := range tiers {
		cp[name] = maps.Clone(p)
	}
	return &Plans{tier: tier, tiers: cp, overrides: map[string]Plan{}}
}

// Override gives key limits of its own, policy by policy, over those of
// its plan: the next decision of key applies them. Once the plans are given
// to a Limiter (WithPlans), a policy it lacks is refused, as in a plan.
func (p *Plans) Override(key string, limits Plan) error {
	key, err := ledger.NormalizeKey(key)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.unknownPolicy(limits, "override of "+strconv.Quote(key)); err != nil {
		return err
	}
	p.overrides[key] = maps.Clone(limits)
	return nil
}

// unknownPolicy reports a policy that plan names and no limiter given
// these plans has; what names the plan in the error. p.mu is held.
func (p *Plans) unknownPolicy(plan Plan, what string) error {
	if p.policies == nil {
		return nil
	}
	for name := range plan {
		if !p.policies[name] {
			return fmt.Errorf("%w: %s names policy %q, which the limiter lacks", ledger.ErrInvalidResource, what, name)
		}
	}
	return nil
}

// RemoveOverride gives key back the limits of its plan.
func (p *Plans) RemoveOverride(key string) {
	if key, err := ledger.NormalizeKey(key); err == nil {
		p.mu.Lock()
		delete(p.overrides, key)
		p.mu.Unlock()
	}
}

// of returns key's override and the limits of its plan (either may be
// nil). key is in its normal form.
func (p *Plans) of(ctx context.Context, key string) (override, plan Plan) {
	if p == nil {
		return nil, nil
	}
	p.mu.RLock()
	override = p.overrides[key]
	p.mu.RUnlock()
	if p.tier != nil {
		plan = p.tiers[p.tier(ctx, key)]
	}
	return override, plan
}

// planned is the limit that override and plan give policy, or 0 for the
// policy's default.
func planned(override, plan Plan, policy string) uint64 {
	if n := override[policy]; n != 0 {
		return n
	}
	return plan[policy]
}

// check reports a plan, or an override, that names a policy the limiter
// lacks; it then knows the limiter's policies, for later overrides.
func (p *Plans) check(limiter string, policies []Policy) error {
	names := map[string]bool{}
	for _, pol := range policies {
		names[pol.Name] = true
	}
	for tier, plan := range p.tiers {
		for name := range plan {
			if !names[name] {
				return fmt.Errorf("%w: plan %q names policy %q, which limiter %q lacks", ledger.ErrInvalidResource, tier, name, limiter)
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	known := p.policies
	p.policies = names
	for key, plan := range p.overrides {
		if err := p.unknownPolicy(plan, "override of "+strconv.Quote(key)); err != nil {
			p.policies = known
			return err
		}
	}
	return nil
}
