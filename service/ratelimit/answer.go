package ratelimit

import (
	"math"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tblimit/tblimit/recipes"
)

// answer is the response to a request whose descriptors are items, all
// settled, and whose verdict is res: OVER_LIMIT unless res allowed it, a
// status per descriptor, and, when the service adds them, the RateLimit
// fields of res, whose policies are the descriptors the chain decided.
func (s *Service) answer(items []item, res recipes.Result) *rls.RateLimitResponse {
	resp := &rls.RateLimitResponse{OverallCode: rls.RateLimitResponse_OK, Statuses: make([]*rls.RateLimitResponse_DescriptorStatus, len(items))}
	if !res.Allowed {
		resp.OverallCode = rls.RateLimitResponse_OVER_LIMIT
	}
	for i := range items {
		resp.Statuses[i] = descriptorStatus(&items[i])
	}
	if s.opts.responseHeaders {
		resp.ResponseHeadersToAdd = headers(res)
	}
	return resp
}

// descriptorStatus is the status of descriptor it: every status of an
// answer is made here, whatever settled it (a decision, a check, a refusal
// without the cluster, nothing), as envoyproxy/ratelimit makes each in
// generateResponseDescriptorStatus. A descriptor of an unlimited rule has
// all there is left; one with its rule's limit known is OVER_LIMIT when it
// refuses the request, and says what is left and when quota returns when
// the cluster decided or checked it.
func descriptorStatus(it *item) *rls.RateLimitResponse_DescriptorStatus {
	ds := &rls.RateLimitResponse_DescriptorStatus{Code: rls.RateLimitResponse_OK}
	switch {
	case it.rule == nil:
		return ds
	case it.rule.Unlimited:
		ds.LimitRemaining = math.MaxUint32
		return ds
	case it.detail == detailNone:
		return ds
	}
	if it.refuses() {
		ds.Code = rls.RateLimitResponse_OVER_LIMIT
	}
	ds.CurrentLimit = &rls.RateLimitResponse_RateLimit{Name: it.rule.Name, RequestsPerUnit: it.limit,
		Unit: rls.RateLimitResponse_RateLimit_Unit(it.rule.Unit)}
	if it.detail == detailDecision {
		ds.LimitRemaining = uint32(min(it.d.Remaining, math.MaxUint32))
		ds.DurationUntilReset = durationpb.New(it.d.ResetIn())
	}
	return ds
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
