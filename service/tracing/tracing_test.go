package tracing_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/service/ratelimit"
	"github.com/tblimit/tblimit/service/tracing"
)

const yaml = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 10}
`

// served is a traced rate limit service on the embedded engine.
type served struct {
	spans      *tracetest.InMemoryExporter
	grpc, http string
	rls        rls.RateLimitServiceClient
}

// serve starts a service traced into an in-memory exporter.
func serve(t *testing.T) *served {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tracing.New(tp)
	c := ledger.New(embedded.New(), tr.LedgerOptions()...)
	t.Cleanup(c.Close)
	svc, err := ratelimit.New(c)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ratelimit.ParseConfig([]string{"rl.yaml"}, map[string][]byte{"rl.yaml": []byte(yaml)})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Load(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	srv, err := ratelimit.NewServer(svc, tr.Server(ratelimit.ServerOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(gl, hl) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	conn, err := grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	exp.Reset() // the configuration's load: no call's
	return &served{spans: exp, grpc: gl.Addr().String(), http: "http://" + hl.Addr().String(), rls: rls.NewRateLimitServiceClient(conn)}
}

func request() *rls.RateLimitRequest {
	return &rls.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}},
	}}
}

// span waits for the span named name and returns it.
func (s *served) span(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var names []string
		for _, sp := range s.spans.GetSpans() {
			if sp.Name == name {
				return sp
			}
			names = append(names, sp.Name)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %q among %q", name, names)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func attr(sp tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

const shouldRateLimit = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// A ShouldRateLimit makes a server span with the call's domain,
// descriptors and overall code, and its decision's TigerBeetle request a
// child span in the same trace; no descriptor value is an attribute.
func TestCallAndRequestSpans(t *testing.T) {
	s := serve(t)
	resp, err := s.rls.ShouldRateLimit(t.Context(), request())
	if err != nil {
		t.Fatalf("ShouldRateLimit = %v", err)
	}
	if resp.GetOverallCode() != rls.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit = %v, want OK", resp)
	}
	call := s.span(t, shouldRateLimit)
	if call.SpanKind != trace.SpanKindServer {
		t.Errorf("%s: kind %v, want server", call.Name, call.SpanKind)
	}
	for key, want := range map[string]string{"ratelimit.domain": "edge", "ratelimit.descriptors": "1", "ratelimit.overall_code": "OK"} {
		if got := attr(call, key).String(); got != want {
			t.Errorf("%s: %s = %q, want %q", call.Name, key, got, want)
		}
	}
	create := s.span(t, "tigerbeetle create_transfers")
	if create.SpanContext.TraceID() != call.SpanContext.TraceID() || create.Parent.SpanID() != call.SpanContext.SpanID() {
		t.Errorf("tigerbeetle create_transfers: trace %s parent %s, want the call's: trace %s span %s",
			create.SpanContext.TraceID(), create.Parent.SpanID(), call.SpanContext.TraceID(), call.SpanContext.SpanID())
	}
	for key, want := range map[string]string{"db.system.name": "tigerbeetle", "db.operation.name": "create_transfers", "tblimit.calls": "1"} {
		if got := attr(create, key).String(); got != want {
			t.Errorf("%s: %s = %q, want %q", create.Name, key, got, want)
		}
	}
	if n := attr(create, "db.operation.batch.size").AsInt64(); n < 1 {
		t.Errorf("%s: db.operation.batch.size = %d, want at least 1", create.Name, n)
	}
	for _, sp := range s.spans.GetSpans() {
		for _, kv := range sp.Attributes {
			if strings.Contains(kv.Value.String(), "10.0.0.1") {
				t.Errorf("%s: %s = %q: a descriptor's value", sp.Name, kv.Key, kv.Value.String())
			}
		}
	}
}

const (
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentID    = "00f067aa0ba902b7"
	traceparent = "00-" + traceID + "-" + parentID + "-01"
)

// A call with a traceparent (gRPC metadata, HTTP header) continues its
// trace.
func TestContinuesTraceparent(t *testing.T) {
	s := serve(t)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent", traceparent)
	if _, err := s.rls.ShouldRateLimit(ctx, request()); err != nil {
		t.Fatalf("ShouldRateLimit = %v", err)
	}
	checkContinues(t, s.span(t, shouldRateLimit))
	s.spans.Reset()

	req, err := http.NewRequest("POST", s.http+"/json", strings.NewReader(`{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.2"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /json = %s, want 200", resp.Status)
	}
	call := s.span(t, "POST /json")
	checkContinues(t, call)
	if got := attr(call, "ratelimit.domain").String(); got != "edge" {
		t.Errorf("POST /json: ratelimit.domain = %q, want edge", got)
	}
	create := s.span(t, "tigerbeetle create_transfers")
	if create.Parent.SpanID() != call.SpanContext.SpanID() {
		t.Errorf("tigerbeetle create_transfers: parent %s, want POST /json's span %s", create.Parent.SpanID(), call.SpanContext.SpanID())
	}
}

func checkContinues(t *testing.T, sp tracetest.SpanStub) {
	t.Helper()
	if sp.SpanContext.TraceID().String() != traceID || sp.Parent.SpanID().String() != parentID || !sp.Parent.IsRemote() {
		t.Errorf("%s: trace %s parent %s (remote %v), want trace %s parent %s (remote)",
			sp.Name, sp.SpanContext.TraceID(), sp.Parent.SpanID(), sp.Parent.IsRemote(), traceID, parentID)
	}
}

// unsetEnv clears every OTEL_* variable FromEnv reads.
func unsetEnv(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME"} {
		t.Setenv(k, "")
	}
}

// Without OTEL_* variables that ask for it, tracing is off: no ledger
// option, the server's options unchanged, the global provider untouched.
func TestOffUnlessAsked(t *testing.T) {
	global := otel.GetTracerProvider()
	for _, env := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "tblimit"},
		{"OTEL_TRACES_EXPORTER": "none"},
		{"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"},
	} {
		unsetEnv(t)
		for k, v := range env {
			t.Setenv(k, v)
		}
		tr, err := tracing.FromEnv(t.Context(), &bytes.Buffer{})
		if err != nil {
			t.Fatalf("FromEnv with %v = %v", env, err)
		}
		if tr.Enabled() || tr.LedgerOptions() != nil {
			t.Errorf("FromEnv with %v: Enabled() = %v, LedgerOptions() = %v; want off", env, tr.Enabled(), tr.LedgerOptions())
		}
		if o := tr.Server(ratelimit.ServerOptions{}); o.GRPCOptions != nil || o.WrapHTTP != nil {
			t.Errorf("FromEnv with %v: Server added options", env)
		}
		if err := tr.Shutdown(t.Context()); err != nil {
			t.Errorf("FromEnv with %v: Shutdown = %v", env, err)
		}
	}
	if otel.GetTracerProvider() != global {
		t.Errorf("the global tracer provider changed")
	}
}

// OTEL_TRACES_EXPORTER=console writes every span to the writer given,
// with OTEL_SERVICE_NAME, by Shutdown at the latest.
func TestConsole(t *testing.T) {
	unsetEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_SERVICE_NAME", "tblimit-test")
	var out bytes.Buffer
	tr, err := tracing.FromEnv(t.Context(), &out)
	if err != nil || !tr.Enabled() {
		t.Fatalf("FromEnv = %v, %v; want on", tr, err)
	}
	c := ledger.New(embedded.New(), tr.LedgerOptions()...)
	r := ledger.Resource{Name: "api", Ledger: 1, Kind: ledger.KindRequests, Window: time.Minute, DefaultLimit: 1, Lazy: true}
	if err := c.CreateResource(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(t.Context(), r, ledger.Request{User: "alice", Amount: 1}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	for _, want := range []string{`"Name":"tigerbeetle create_transfers"`, `"Value":"tblimit-test"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("console output lacks %s:\n%s", want, out.String())
		}
	}
}

// An exporter or protocol FromEnv does not serve is ErrConfig; an OTLP
// endpoint alone turns otlp on, and nothing is sent before a span.
func TestFromEnvExporters(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		enabled bool
		err     error
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, tracing.ErrConfig},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, false, tracing.ErrConfig},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, true, nil},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1"}, true, nil},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console, otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, true, nil},
	} {
		unsetEnv(t)
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		tr, err := tracing.FromEnv(t.Context(), &bytes.Buffer{})
		if !errors.Is(err, c.err) {
			t.Errorf("FromEnv with %v = %v, want %v", c.env, err, c.err)
			continue
		}
		if err != nil {
			continue
		}
		if tr.Enabled() != c.enabled {
			t.Errorf("FromEnv with %v: Enabled() = %v, want %v", c.env, tr.Enabled(), c.enabled)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if err := tr.Shutdown(ctx); err != nil {
			t.Errorf("FromEnv with %v: Shutdown, no span sent, = %v", c.env, err)
		}
		cancel()
	}
}

// A request that served several calls is the child of the first sampled
// one and links to each; one that served no traced call is a root.
func TestBatchedRequestSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	o := tracing.NewObserver(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	call := func(id byte, sampled bool) context.Context {
		cfg := trace.SpanContextConfig{TraceID: trace.TraceID{id}, SpanID: trace.SpanID{id}}
		if sampled {
			cfg.TraceFlags = trace.FlagsSampled
		}
		return trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(cfg))
	}
	start := time.Now()
	o.ObserveRequest(ledger.RequestEvent{Operation: "create_transfers", Events: 3, Results: 3, Failed: 1, Start: start,
		Took: time.Millisecond, Calls: []context.Context{call(1, false), call(2, true), call(3, true)}})
	o.ObserveRequest(ledger.RequestEvent{Operation: "lookup_accounts", Events: 2, Start: start, Took: time.Millisecond,
		Err: errors.New("ledger: cluster unavailable"), Calls: []context.Context{}})
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	create, lookup := spans[0], spans[1]
	if create.Parent.TraceID() != (trace.TraceID{2}) || create.Parent.SpanID() != (trace.SpanID{2}) {
		t.Errorf("create_transfers: parent %s/%s, want the first sampled call's", create.Parent.TraceID(), create.Parent.SpanID())
	}
	if len(create.Links) != 3 {
		t.Errorf("create_transfers: %d links, want 3 (one per call)", len(create.Links))
	}
	if got := attr(create, "tblimit.tigerbeetle.failed").AsInt64(); got != 1 {
		t.Errorf("create_transfers: tblimit.tigerbeetle.failed = %d, want 1", got)
	}
	if !create.StartTime.Equal(start) || create.EndTime.Sub(create.StartTime) != time.Millisecond {
		t.Errorf("create_transfers: from %v to %v, want the request's start and duration", create.StartTime, create.EndTime)
	}
	if lookup.Parent.IsValid() || lookup.Status.Code != otelcodes.Error {
		t.Errorf("lookup_accounts: parent %v, status %v; want a root span with status Error", lookup.Parent, lookup.Status)
	}
}
