package ratelimit

import (
	"context"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// traceCall puts on the span of ctx, the gRPC or HTTP call's when the
// server is traced (see ServerOptions), what a reader of the trace needs
// of a ShouldRateLimit: the domain, how many descriptors, and the overall
// code (none when the call failed: the span's status says why). Never a
// descriptor's values: they may be personal data (an address, a user's
// ID). It costs nothing when the span does not record.
func traceCall(ctx context.Context, req *rls.RateLimitRequest, resp *rls.RateLimitResponse) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		attribute.String("ratelimit.domain", req.GetDomain()),
		attribute.Int("ratelimit.descriptors", len(req.GetDescriptors())),
	)
	if resp == nil {
		return
	}
	over := 0
	for _, st := range resp.GetStatuses() {
		if st.GetCode() == rls.RateLimitResponse_OVER_LIMIT {
			over++
		}
	}
	span.SetAttributes(
		attribute.String("ratelimit.overall_code", resp.GetOverallCode().String()),
		attribute.Int("ratelimit.descriptors_over_limit", over),
	)
}
