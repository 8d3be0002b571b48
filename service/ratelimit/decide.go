package ratelimit

import (
	"context"
	"errors"
	"time"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/recipes"
	"github.com/tblimit/tblimit/service"
)

// MaxDescriptors is the most descriptors one request may carry.
const MaxDescriptors = 8189

// item is one descriptor of a request on its way to an answer.
type item struct {
	rule   *rule
	limit  uint32 // the rule's, or the descriptor's override
	user   string
	metric string
	hits   uint64 // 0: check only (a descriptor's own hits_addend of 0)
	part   int    // its index in the chain; or partNone, partRefused, partCheck, partReserve, partAfter
	// cost is how its hits count: taken (the default), a charge after the
	// call, or the check (reserve) or charge (settle) of a pair named by
	// reqID.
	cost  cost
	reqID string
	// Once settled: what its rule made of it, and how much of that its
	// status tells.
	d      ledger.Decision
	detail detail
}

// What becomes of an item that is not in the chain.
const (
	partNone    = -1 // no rule limits it (none met, unlimited, replaced)
	partRefused = -2 // refused without the cluster: its hits can never fit (a limit of 0, or under the hits), or a check found it at its limit
	partCheck   = -3 // check only: read, nothing taken
	partReserve = -4 // a paired check: held under its request's ID, before the chain
	partAfter   = -5 // a charge after the call, or the settling of a paired check: never refuses
)

// cost is how a descriptor's hits count (see Rule.ChargeAfter,
// Rule.ReserveKey).
type cost uint8

const (
	costTake    cost = iota // taken if they fit, else the request is refused
	costCharge              // costs already incurred: recorded, past the limit too
	costReserve             // a paired check: held under the request's ID
	costSettle              // a paired charge: settles the hold made under the request's ID
)

// detail is how much of what its rule made of a descriptor its status
// tells.
type detail uint8

const (
	// detailNone: no rule limits it, or the cluster did not answer, or
	// it is left out (a rule in shadow mode that refuses without asking).
	detailNone detail = iota
	// detailLimit: its rule's limit; refused, or not asked because another
	// descriptor was, without the cluster.
	detailLimit
	// detailDecision: its rule's decision or check, made by the cluster (or
	// its Client's view): also what is left and when quota returns.
	detailDecision
)

// refuses reports whether it refuses the request: its rule refused, and
// is not in shadow mode.
func (it *item) refuses() bool {
	return it.d.Reason == ledger.LimitExceeded && !it.rule.ShadowMode
}

// settle records in it what its rule made of it, d, and how much of that
// its status tells, and counts its hits. It reports whether it refuses the
// request.
func (s *Service) settle(it *item, d ledger.Decision, k detail) bool {
	it.d, it.detail = d, k
	s.stats.count(it)
	return it.refuses()
}

// ShouldRateLimit decides req: every descriptor that meets a rule with a
// limit takes its hits from it (the request's hits_addend, 0 meaning 1, or
// the descriptor's own, where 0 checks without taking), as one chain, all
// or none. See the package documentation for the answer's fields.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rls.RateLimitRequest) (resp *rls.RateLimitResponse, err error) {
	start := time.Now()
	defer func() {
		s.stats.called(start, resp, err)
		traceCall(ctx, req, resp)
	}()
	leave, err := s.bound.Enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	switch {
	case req.GetDomain() == "":
		return nil, service.Errorf(codes.InvalidArgument, service.ReasonInvalidArgument, "rate limit domain must not be empty")
	case len(req.GetDescriptors()) == 0:
		return nil, service.Errorf(codes.InvalidArgument, service.ReasonInvalidArgument, "rate limit descriptor list must not be empty")
	case len(req.GetDescriptors()) > MaxDescriptors:
		return nil, service.Errorf(codes.InvalidArgument, service.ReasonInvalidArgument, "%d descriptors in one request: at most %d", len(req.GetDescriptors()), MaxDescriptors)
	}
	// Everything the cluster is asked ends before the caller's deadline.
	ctx, cancel := service.AnswerBefore(ctx)
	defer cancel()
	resp, err = s.decide(ctx, req)
	if err != nil && s.opts.failsOpen() && errors.Is(err, ledger.ErrUnavailable) {
		return s.answer(make([]item, len(req.GetDescriptors())), recipes.NewResult(true, ledger.Unavailable, nil)), nil
	}
	if err != nil {
		return nil, service.Status(err)
	}
	return resp, nil
}

// decide is ShouldRateLimit's work.
func (s *Service) decide(ctx context.Context, req *rls.RateLimitRequest) (*rls.RateLimitResponse, error) {
	items, err := s.match(ctx, req)
	if err != nil {
		return nil, err
	}
	// Costs already incurred are recorded first, whatever the rest of the
	// request: they never refuse it, and the checks that follow see them.
	if err := s.after(ctx, items); err != nil {
		return nil, err
	}
	if err := s.payDebts(ctx, items); err != nil {
		return nil, err
	}
	if err := s.check(ctx, items); err != nil {
		return nil, err
	}
	if s.refusedLocally(items) {
		return s.answer(items, recipes.NewResult(false, ledger.LimitExceeded, nil)), nil
	}
	held, refused, err := s.reserve(ctx, items)
	if err != nil || refused {
		if err == nil {
			s.notAsked(items)
		}
		s.release(held)
		if err != nil {
			return nil, err
		}
		return s.answer(items, recipes.NewResult(false, ledger.LimitExceeded, nil)), nil
	}
	res, err := s.chain(ctx, items)
	if err != nil || !res.Allowed {
		s.release(held) // all or nothing: the chain refused, so the checks hold nothing
	}
	if err != nil {
		return nil, err
	}
	return s.answer(items, res), nil
}

// failsOpen reports whether the service answers OK while the cluster
// does not answer.
func (o *options) failsOpen() bool {
	return o.onUnavailable != nil && *o.onUnavailable == ledger.FailOpen
}

// check decides the check-only descriptors, taking nothing: over the limit
// when nothing is left, as envoyproxy/ratelimit answers an increment of 0
// at the limit. They are checked together, in the Client's pipeline (one
// read shared with the checks of other requests in flight, or none when
// the Client knows the keys). One enforcing descriptor over its limit
// refuses the request, and the chain is not sent.
func (s *Service) check(ctx context.Context, items []item) error {
	var idx []int
	var parts []ledger.Part
	for i := range items {
		if it := &items[i]; it.part == partCheck {
			it.part = partNone
			idx = append(idx, i)
			parts = append(parts, ledger.Part{Resource: it.rule.res,
				Request: ledger.Request{User: it.user, Amount: 1, Limit: uint64(it.limit)}})
		}
	}
	if len(parts) == 0 {
		return nil
	}
	ds, err := s.c.CheckAll(ctx, parts)
	if err != nil {
		return err
	}
	for k, i := range idx {
		if s.settle(&items[i], ds[k], detailDecision) {
			items[i].part = partRefused // refuses the request: nothing taken elsewhere
		}
	}
	return nil
}

// refusedLocally settles a request that a descriptor refuses without the
// cluster (a limit of 0, more hits than the whole limit, or a check-only
// descriptor at its limit; shadow_mode rules excepted): nothing is asked
// of the cluster, since nothing may be taken; the other descriptors report
// their limit only. A rule in shadow mode that would refuse is counted,
// and left out.
func (s *Service) refusedLocally(items []item) bool {
	refused := false
	for i := range items {
		it := &items[i]
		switch {
		case it.part != partRefused:
			continue
		case it.detail == detailDecision: // a check-only descriptor at its limit: settled already
			refused = true
			continue
		}
		never := ledger.ExceedsLimit(uint64(it.limit))
		if it.rule.ShadowMode {
			s.settle(it, never, detailNone)
			it.part = partNone
			continue
		}
		s.settle(it, never, detailLimit)
		refused = true
	}
	if !refused {
		return false
	}
	s.notAsked(items)
	return true
}

// notAsked settles the descriptors of a refused request that were not
// asked, since another refused: they report their limit only.
func (s *Service) notAsked(items []item) {
	for i := range items {
		if it := &items[i]; it.part >= 0 || it.part == partReserve {
			it.part = partNone
			s.settle(it, ledger.NotAsked(uint64(it.limit)), detailLimit)
		}
	}
}

// chain decides the descriptors that are in the chain (part 0) as one, a
// Group's decision, and settles each with its rule's decision unless the
// cluster did not answer. The Result names each policy by its rule's
// name, else its key, as the RateLimit fields name it.
func (s *Service) chain(ctx context.Context, items []item) (recipes.Result, error) {
	members := make([]recipes.Member, 0, len(items))
	for i := range items {
		it := &items[i]
		if it.part < 0 {
			continue
		}
		it.part = len(members)
		members = append(members, recipes.Member{Limiter: it.rule.limiter, Key: it.user, Cost: recipes.Cost{Requests: it.hits},
			Limits: recipes.Plan{it.rule.res.Name: uint64(it.limit)}})
	}
	if len(members) == 0 {
		return recipes.NewResult(true, ledger.Admitted, nil), nil
	}
	res, err := s.group.Allow(ctx, members)
	if err != nil || res.Reason == ledger.Unavailable {
		return res, err // unanswered: OnUnavailable decided, and nothing is known of each descriptor
	}
	shown := make([]recipes.PolicyResult, 0, len(members))
	for i := range items {
		it := &items[i]
		if it.part < 0 {
			continue
		}
		p := res.Policies()[it.part]
		p.Policy = it.rule.display
		s.settle(it, p.Decision, detailDecision)
		shown = append(shown, p)
	}
	return recipes.NewResult(res.Allowed, res.Reason, shown), nil
}
