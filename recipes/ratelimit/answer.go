package ratelimit

import (
	"math"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/recipes"
)

// okResponse is an answer of OK for n descriptors.
func okResponse(n int) *rls.RateLimitResponse {
	resp := &rls.RateLimitResponse{OverallCode: rls.RateLimitResponse_OK, Statuses: make([]*rls.RateLimitResponse_DescriptorStatus, n)}
	for i := range resp.Statuses {
		resp.Statuses[i] = &rls.RateLimitResponse_DescriptorStatus{Code: rls.RateLimitResponse_OK}
	}
	return resp
}

// describe makes ds, the status of descriptor it, from d, its rule's
// decision (or check), and counts it; shadow says that the rule is in
// shadow mode, which answers OK what it refuses. It reports whether the
// rule refused. Every descriptor a decision or a check answered is
// described here, as envoyproxy/ratelimit makes every status in one
// function.
func (s *Service) describe(it *item, d ledger.Decision, shadow bool, ds *rls.RateLimitResponse_DescriptorStatus) (refused bool) {
	ds.CurrentLimit = currentLimit(it)
	ds.LimitRemaining = uint32(min(d.Remaining, math.MaxUint32))
	ds.DurationUntilReset = durationpb.New(d.ResetIn())
	refused = d.Reason == ledger.LimitExceeded
	switch {
	case refused && shadow:
		s.stats.count(it, hitsShadow)
		return false
	case refused:
		ds.Code = rls.RateLimitResponse_OVER_LIMIT
		s.stats.count(it, hitsOver)
	case !d.Allowed:
		s.stats.count(it, hitsNotTaken) // it fitted; another refused
	case float64(d.Remaining) < nearLimitRatio*float64(d.Limit):
		s.stats.count(it, hitsNear)
	default:
		s.stats.count(it, hitsWithin)
	}
	return refused
}

// answer fills resp from the chain's result.
func (s *Service) answer(items []item, res recipes.Result, resp *rls.RateLimitResponse) {
	if !res.Allowed {
		resp.OverallCode = rls.RateLimitResponse_OVER_LIMIT
	}
	if res.Reason == ledger.Unavailable {
		return // the cluster did not answer: OnUnavailable decided, nothing is known
	}
	for i := range items {
		it := &items[i]
		if it.part < 0 {
			continue
		}
		p := res.Policies[it.part]
		s.describe(it, p.Decision, p.Shadow, resp.Statuses[i])
		res.Policies[it.part].Policy = it.rule.display
	}
	if s.opts.responseHeaders {
		resp.ResponseHeadersToAdd = headers(res)
	}
}

// currentLimit is the limit an item's status reports.
func currentLimit(it *item) *rls.RateLimitResponse_RateLimit {
	return &rls.RateLimitResponse_RateLimit{Name: it.rule.Name, RequestsPerUnit: it.limit,
		Unit: rls.RateLimitResponse_RateLimit_Unit(it.rule.Unit)}
}

// headers are the RateLimit-Policy and RateLimit fields of res.
func headers(res recipes.Result) []*corev3.HeaderValue {
	policy, state := res.RateLimitFields()
	var hs []*corev3.HeaderValue
	if policy != "" {
		hs = append(hs, &corev3.HeaderValue{Key: "RateLimit-Policy", Value: policy})
	}
	if state != "" {
		hs = append(hs, &corev3.HeaderValue{Key: "RateLimit", Value: state})
	}
	return hs
}
