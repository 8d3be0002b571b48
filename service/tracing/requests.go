// Package tracing traces tblimit with OpenTelemetry: a rate limit service's
// calls (gRPC and HTTP) and a ledger.Client's requests to TigerBeetle,
// configured by the standard OTEL_* environment variables (FromEnv).
//
// It lives in its own package, as package recipes/metrics does, so that
// tblimit's other packages depend on OpenTelemetry's API at most, never on
// its SDK and exporters.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tblimit/tblimit/ledger"
)

// Observer makes a span of every request a ledger.Client sends to
// TigerBeetle: a ledger.RequestObserver (give it to a Client with
// ledger.WithRequestObserver). Build it with NewObserver; it is safe for
// concurrent use.
//
// A span is named "tigerbeetle " and the operation (create_transfers,
// lookup_accounts, ...), of kind client, and has the attributes
//
//	db.system.name             tigerbeetle
//	db.operation.name          the operation
//	db.operation.batch.size    the events it carried (transfers, accounts, IDs, or 1 filter)
//	tblimit.tigerbeetle.results  the results answered
//	tblimit.tigerbeetle.failed   of a create, the events not created (a limit's denial is one)
//	tblimit.calls              the calls the request served
//
// and status Error with the error when the request failed. It carries no
// user key: IDs sent to TigerBeetle are derived from them.
type Observer struct {
	tracer trace.Tracer
}

// NewObserver returns an Observer whose spans tp makes.
func NewObserver(tp trace.TracerProvider) *Observer {
	return &Observer{tracer: tp.Tracer(scope)}
}

// scope is the instrumentation scope of tblimit's spans.
const scope = "github.com/tblimit/tblimit/service/tracing"

// ObserveRequest makes e's span, after the fact: it starts at e.Start and
// lasts e.Took.
//
// A request may serve many calls: the Client sends the decisions of
// concurrent calls together, one create for all of them. A span has one
// parent, so the request's span is the child of the first call whose span
// is sampled (else of the first call) and, when it served several, links
// to each of them (the first 128), the parent included. We considered a
// span per call for each request, so that every call's trace shows the
// request inline, and rejected it: one request would look like many, and a
// batch of a thousand calls would make a thousand spans. The trace of a
// call that is not the parent holds no span of the request; the link finds
// it, and tblimit.calls says how many calls shared it. A request that
// served no traced call (the Client's own reads between batches, a
// configuration's load) is a root span.
func (o *Observer) ObserveRequest(e ledger.RequestEvent) {
	parent, links := parentOf(e.Calls)
	attrs := []attribute.KeyValue{
		attribute.String("db.system.name", "tigerbeetle"),
		attribute.String("db.operation.name", e.Operation),
		attribute.Int("db.operation.batch.size", e.Events),
		attribute.Int("tblimit.tigerbeetle.results", e.Results),
		attribute.Int("tblimit.calls", len(e.Calls)),
	}
	if e.Failed > 0 {
		attrs = append(attrs, attribute.Int("tblimit.tigerbeetle.failed", e.Failed))
	}
	_, span := o.tracer.Start(parent, "tigerbeetle "+e.Operation, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(e.Start), trace.WithAttributes(attrs...), trace.WithLinks(links...))
	if e.Err != nil {
		span.RecordError(e.Err, trace.WithTimestamp(e.Start.Add(e.Took)))
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(trace.WithTimestamp(e.Start.Add(e.Took)))
}

// maxLinks bounds the links of a request's span: the SDK's default
// (OTEL_SPAN_LINK_COUNT_LIMIT) drops those beyond it anyway.
const maxLinks = 128

// parentOf is the context a request serving calls is the child of (see
// ObserveRequest) and the links to the calls' spans.
func parentOf(calls []context.Context) (context.Context, []trace.Link) {
	parent := context.Background()
	var first, sampled trace.SpanContext
	var links []trace.Link
	for _, c := range calls {
		sc := trace.SpanContextFromContext(c)
		if !sc.IsValid() {
			continue
		}
		if len(calls) > 1 && len(links) < maxLinks {
			links = append(links, trace.Link{SpanContext: sc})
		}
		if !first.IsValid() {
			first = sc
		}
		if !sampled.IsValid() && sc.IsSampled() {
			sampled = sc
		}
	}
	switch {
	case sampled.IsValid():
		parent = trace.ContextWithSpanContext(parent, sampled)
	case first.IsValid():
		parent = trace.ContextWithSpanContext(parent, first)
	}
	return parent, links
}

var _ ledger.RequestObserver = (*Observer)(nil)
