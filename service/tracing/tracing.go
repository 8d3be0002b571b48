package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/service/ratelimit"
)

// ErrConfig is a tracing configuration (OTEL_* variables) that cannot be
// served.
var ErrConfig = errors.New("tracing: configuration")

// Tracing is the tracing of a rate limit service: off, or a tracer
// provider and the W3C trace context propagators (traceparent, tracestate,
// baggage). Build it with FromEnv, or New. A Tracing that is off installs
// nothing: no exporter, no span, no change to OpenTelemetry's global
// provider (a Tracing never changes it). Its methods are safe for
// concurrent use; the zero Tracing is off.
type Tracing struct {
	tp       trace.TracerProvider // nil: off
	shutdown func(context.Context) error
	prop     propagation.TextMapPropagator
}

// FromEnv returns the Tracing that the standard OTEL_* environment
// variables configure, off unless one of them asks for it:
//
//	OTEL_TRACES_EXPORTER          otlp, console (spans as JSON to console), none (off), or a comma-separated list;
//	                              unset: otlp if an OTLP endpoint is set, else off
//	OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT   where otlp sends (and turn it on)
//	OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL   grpc or http/protobuf (the default)
//	OTEL_SDK_DISABLED=true        off, whatever the rest says
//
// and, once on, the SDK and the OTLP exporters read the others themselves
// (OTEL_SERVICE_NAME, default tblimit; OTEL_RESOURCE_ATTRIBUTES;
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, default
// parentbased_always_on; OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _INSECURE,
// _CERTIFICATE, ...; OTEL_BSP_*). An exporter or protocol it does not know
// is ErrConfig. Nothing is sent before the first span: an unreachable
// collector costs dropped spans, not an error here.
func FromEnv(ctx context.Context, console io.Writer) (*Tracing, error) {
	names := os.Getenv("OTEL_TRACES_EXPORTER")
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return &Tracing{}, nil
	}
	if names == "" && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		names = "otlp"
	}
	var opts []sdktrace.TracerProviderOption
	for name := range strings.SplitSeq(names, ",") {
		switch name = strings.TrimSpace(name); name {
		case "", "none":
		case "otlp":
			exp, err := otlpExporter(ctx)
			if err != nil {
				return nil, err
			}
			opts = append(opts, sdktrace.WithBatcher(exp))
		case "console":
			// Spans are written as they end: console is for watching.
			exp, err := stdouttrace.New(stdouttrace.WithWriter(console))
			if err != nil {
				return nil, fmt.Errorf("tracing: console: %w", err)
			}
			opts = append(opts, sdktrace.WithSyncer(exp))
		default:
			return nil, fmt.Errorf("%w: OTEL_TRACES_EXPORTER %q: want otlp, console or none", ErrConfig, name)
		}
	}
	if len(opts) == 0 {
		return &Tracing{}, nil
	}
	// The environment's service name and attributes win over the default.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "tblimit")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithResource(res))...)
	t := New(tp)
	t.shutdown = tp.Shutdown
	return t, nil
}

// otlpExporter is OTLP's exporter over the protocol the environment names.
func otlpExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	var err error
	switch protocol {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_PROTOCOL %q: want grpc or http/protobuf", ErrConfig, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp %s: %w", protocol, err)
	}
	return exp, nil
}

// New returns a Tracing whose spans tp makes (a provider of a test's,
// say); Shutdown does not shut tp down.
func New(tp trace.TracerProvider) *Tracing {
	return &Tracing{tp: tp, prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}
}

// Enabled reports whether t makes spans.
func (t *Tracing) Enabled() bool { return t.tp != nil }

// LedgerOptions are the options that trace a ledger.Client's requests to
// TigerBeetle (see Observer): none when t is off.
func (t *Tracing) LedgerOptions() []ledger.Option {
	if !t.Enabled() {
		return nil
	}
	return []ledger.Option{ledger.WithRequestObserver(NewObserver(t.tp))}
}

// Server returns o with what traces a ratelimit.Server's calls: a span per
// gRPC call, of every service the server has but health checks
// (otelgrpc), and per HTTP request but GET /healthcheck and /metrics
// (otelhttp), each continuing the trace of the caller's traceparent. o unchanged when t is off.
func (t *Tracing) Server(o ratelimit.ServerOptions) ratelimit.ServerOptions {
	if !t.Enabled() {
		return o
	}
	o.GRPCOptions = append(o.GRPCOptions[:len(o.GRPCOptions):len(o.GRPCOptions)], grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(t.tp), otelgrpc.WithPropagators(t.prop),
		otelgrpc.WithFilter(filters.Not(filters.ServiceName("grpc.health.v1.Health"))))))
	wrap := o.WrapHTTP
	o.WrapHTTP = func(h http.Handler) http.Handler {
		if wrap != nil {
			h = wrap(h)
		}
		return otelhttp.NewHandler(h, "tblimit", otelhttp.WithTracerProvider(t.tp), otelhttp.WithPropagators(t.prop),
			otelhttp.WithFilter(traced), otelhttp.WithSpanNameFormatter(spanName))
	}
	return o
}

// traced reports whether an HTTP request gets a span: not the probes and
// scrapes, which come every few seconds and say nothing of the calls.
func traced(r *http.Request) bool {
	return r.Method != http.MethodGet || (r.URL.Path != "/healthcheck" && r.URL.Path != "/metrics")
}

// spanName is an HTTP request's span name: its route once the mux chose
// one ("POST /json"), else its method.
func spanName(_ string, r *http.Request) string {
	if r.Pattern != "" {
		return r.Pattern
	}
	return r.Method
}

// Shutdown sends the spans still buffered and stops t's exporters, within
// ctx (give it a deadline of its own: the process's context is done by
// then). Spans ended after it are dropped. A no-op when t is off, or made
// by New.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.shutdown == nil {
		return nil
	}
	if err := t.shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}
