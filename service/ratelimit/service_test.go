package ratelimit_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/service/ratelimit"
	"github.com/tblimit/tblimit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is a service on loopback for one test.
type env struct {
	t      *testing.T
	b      *testenv.Backend
	svc    *ratelimit.Service
	srv    *ratelimit.Server
	rls    rls.RateLimitServiceClient
	conn   *grpc.ClientConn
	http   string // base URL
	grpc   string // address
	domain string
}

// domainOf is a domain of the test's own: on a shared real server, rules
// (and so ledgers and users) of another test or run never meet it.
func domainOf(t *testing.T) string {
	return fmt.Sprintf("%s-%08x", strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()), rand.Uint32())
}

// config is yaml for domain: "DOMAIN" in it is replaced.
func config(t *testing.T, domain, yaml string) *ratelimit.Config {
	t.Helper()
	cfg, err := ratelimit.ParseConfig([]string{"test.yaml"}, map[string][]byte{"test.yaml": []byte(strings.ReplaceAll(yaml, "DOMAIN", domain))})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// start serves yaml on c (nil: a client of b), with opts.
func start(t *testing.T, b *testenv.Backend, c *ledger.Client, yaml string, opts ...ratelimit.Option) *env {
	t.Helper()
	if c == nil {
		c = ledger.New(b.Client, ledger.WithNow(b.Now))
	}
	svc, err := ratelimit.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, b: b, svc: svc, domain: domainOf(t)}
	// A first call on a real server registers a session and provisions:
	// the load gets a deadline well beyond it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := svc.Load(ctx, config(t, e.domain, yaml)); err != nil {
		t.Fatal(err)
	}
	e.srv, err = ratelimit.NewServer(svc, ratelimit.ServerOptions{})
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
	e.grpc, e.http = gl.Addr().String(), "http://"+hl.Addr().String()
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(gl, hl) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.srv.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	e.conn, err = grpc.NewClient(e.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.conn.Close() })
	e.rls = rls.NewRateLimitServiceClient(e.conn)
	return e
}

// desc is a descriptor of key=value pairs.
func desc(kv ...string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (e *env) ask(ds ...*rlcommon.RateLimitDescriptor) *rls.RateLimitResponse {
	e.t.Helper()
	resp, err := e.call(&rls.RateLimitRequest{Domain: e.domain, Descriptors: ds})
	if err != nil {
		e.t.Fatalf("ShouldRateLimit = %v", err)
	}
	return resp
}

func (e *env) call(req *rls.RateLimitRequest) (*rls.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.rls.ShouldRateLimit(ctx, req)
}

// codes is the overall code and each descriptor's, e.g. "OVER_LIMIT: OK OVER_LIMIT".
func codesOf(r *rls.RateLimitResponse) string {
	s := r.GetOverallCode().String() + ":"
	for _, st := range r.GetStatuses() {
		s += " " + st.GetCode().String()
	}
	return s
}

func TestCountsDownThenOverLimit(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 20}
`)
		for want := 19; want >= 0; want-- {
			r := e.ask(desc("remote_address", "10.0.0.1"))
			st := r.GetStatuses()[0]
			if codesOf(r) != "OK: OK" || int(st.GetLimitRemaining()) != want {
				t.Fatalf("call %d = %s, %d remaining; want OK: OK, %d remaining", 20-want, codesOf(r), st.GetLimitRemaining(), want)
			}
			if lim := st.GetCurrentLimit(); lim.GetRequestsPerUnit() != 20 || lim.GetUnit() != rls.RateLimitResponse_RateLimit_MINUTE {
				t.Fatalf("current_limit = %v, want 20 per MINUTE", lim)
			}
		}
		r := e.ask(desc("remote_address", "10.0.0.1"))
		if codesOf(r) != "OVER_LIMIT: OVER_LIMIT" {
			t.Fatalf("21st call = %s, want OVER_LIMIT: OVER_LIMIT", codesOf(r))
		}
		first := r.GetStatuses()[0].GetDurationUntilReset().AsDuration()
		if first <= 0 || first > time.Minute {
			t.Fatalf("duration_until_reset = %v, want in (0, 1m]", first)
		}
		b.Advance(t, 2*time.Second)
		later := e.ask(desc("remote_address", "10.0.0.1")).GetStatuses()[0].GetDurationUntilReset().AsDuration()
		if later > first-2*time.Second+50*time.Millisecond {
			t.Errorf("duration_until_reset 2s later = %v, want at most %v", later, first-2*time.Second)
		}
		// Another address is another user, with the whole limit.
		if r := e.ask(desc("remote_address", "10.0.0.2")); r.GetStatuses()[0].GetLimitRemaining() != 19 {
			t.Errorf("another address: %d remaining, want 19", r.GetStatuses()[0].GetLimitRemaining())
		}
	})
}

func TestOverLimitDescriptorTakesNothingFromOthers(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: route
    rate_limit: {unit: minute, requests_per_unit: 1}
`)
		if r := e.ask(desc("route", "/pay")); codesOf(r) != "OK: OK" {
			t.Fatalf("route alone = %s", codesOf(r))
		}
		r := e.ask(desc("user", "alice"), desc("route", "/pay"))
		if codesOf(r) != "OVER_LIMIT: OK OVER_LIMIT" {
			t.Fatalf("both = %s, want OVER_LIMIT: OK OVER_LIMIT", codesOf(r))
		}
		if got := r.GetStatuses()[0].GetLimitRemaining(); got != 5 {
			t.Errorf("user's remaining in the denied request = %d, want 5 (nothing taken)", got)
		}
		if got := e.ask(desc("user", "alice")).GetStatuses()[0].GetLimitRemaining(); got != 4 {
			t.Errorf("user alone afterwards: %d remaining, want 4", got)
		}
	})
}

func TestRules(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: ldap
    rate_limit: {unlimited: true}
  - key: trusted
    rate_limit: {unlimited: true, replaces: [{name: blocked}]}
  - key: blocked
    rate_limit: {name: blocked, unit: second, requests_per_unit: 0}
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: service
    descriptors:
      - key: user
        value: trial
        shadow_mode: true
        rate_limit: {unit: minute, requests_per_unit: 1}
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        rate_limit: {name: specific, unit: minute, requests_per_unit: 1}
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        rate_limit: {replaces: [{name: specific}], unit: minute, requests_per_unit: 3}
`)
		r := e.ask(desc("ldap", "x"), desc("nothing", "here"), desc())
		if codesOf(r) != "OK: OK OK OK" || r.GetStatuses()[0].GetLimitRemaining() != math.MaxUint32 || r.GetStatuses()[1].GetCurrentLimit() != nil {
			t.Fatalf("unlimited, unmatched, empty = %v", r)
		}
		if r := e.ask(desc("trusted", "t"), desc("blocked", "b")); codesOf(r) != "OK: OK OK" {
			t.Errorf("an unlimited rule replacing a blocking one = %s, want OK: OK OK", codesOf(r))
		}
		if r := e.ask(desc("remote_address", "50.0.0.5"), desc("remote_address", "50.0.0.6")); codesOf(r) != "OVER_LIMIT: OVER_LIMIT OK" {
			t.Errorf("a blocked address with another = %s, want OVER_LIMIT: OVER_LIMIT OK", codesOf(r))
		}
		if got := e.ask(desc("remote_address", "50.0.0.6")).GetStatuses()[0].GetLimitRemaining(); got != 9 {
			t.Errorf("the other address afterwards: %d remaining, want 9 (the denied request took nothing)", got)
		}
		for i := range 3 {
			if r := e.ask(desc("service", "s", "user", "trial")); codesOf(r) != "OK: OK" {
				t.Fatalf("shadow call %d = %s, want OK: OK", i, codesOf(r))
			}
		}
		// Replaced: with both, only the replacing rule counts.
		for i := range 3 {
			if r := e.ask(desc("key_1", "value_1", "user", "bob"), desc("key_2", "value_2", "user", "bob")); codesOf(r) != "OK: OK OK" {
				t.Fatalf("replaced call %d = %s, want OK: OK OK", i, codesOf(r))
			}
		}
		if r := e.ask(desc("key_1", "value_1", "user", "bob")); codesOf(r) != "OK: OK" {
			t.Errorf("the replaced rule alone = %s, want OK (it took nothing while replaced)", codesOf(r))
		}
		if r := e.ask(desc("key_1", "value_1", "user", "bob")); codesOf(r) != "OVER_LIMIT: OVER_LIMIT" {
			t.Errorf("the replaced rule alone, again = %s, want OVER_LIMIT", codesOf(r))
		}
	})
}

func TestReload(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		const yaml = `
domain: DOMAIN
descriptors:
  - key: api_key
    rate_limit: {unit: hour, requests_per_unit: %d}
`
		e := start(t, b, nil, fmt.Sprintf(yaml, 3))
		rule := func() *ratelimit.Rule { cfg, _ := e.svc.Config(); return cfg.Rules()[0] }
		before, _ := e.svc.Resource(rule())
		load := func(n int) {
			t.Helper()
			if err := e.svc.Load(context.Background(), config(t, e.domain, fmt.Sprintf(yaml, n))); err != nil {
				t.Fatal(err)
			}
		}
		steps := []struct {
			load      int // 0: no reload
			code      string
			remaining uint32
		}{
			{0, "OK: OK", 2}, {0, "OK: OK", 1}, {0, "OK: OK", 0}, {0, "OVER_LIMIT: OVER_LIMIT", 0},
			{5, "OK: OK", 1}, {0, "OK: OK", 0}, {0, "OVER_LIMIT: OVER_LIMIT", 0},
			{2, "OVER_LIMIT: OVER_LIMIT", 0}, // five in flight, the limit lowered to two
		}
		for i, s := range steps {
			if s.load != 0 {
				load(s.load)
			}
			r := e.ask(desc("api_key", "k1"))
			if codesOf(r) != s.code || r.GetStatuses()[0].GetLimitRemaining() != s.remaining {
				t.Fatalf("step %d (load %d) = %s, %d remaining; want %s, %d", i, s.load, codesOf(r), r.GetStatuses()[0].GetLimitRemaining(), s.code, s.remaining)
			}
		}
		after, _ := e.svc.Resource(rule())
		if before != after {
			t.Errorf("a reload of the limit moved the rule from %v to %v", before, after)
		}
		if got := e.ask(desc("api_key", "k1")).GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(); got != 2 {
			t.Errorf("current_limit after reloads = %d, want 2", got)
		}
	})
}

func TestBadRequests(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 3}
`)
		many := make([]*rlcommon.RateLimitDescriptor, 10_000)
		for i := range many {
			many[i] = desc("k", fmt.Sprint(i))
		}
		for _, c := range []struct {
			name string
			req  *rls.RateLimitRequest
			want codes.Code
		}{
			{"empty domain", &rls.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{desc("k", "v")}}, codes.InvalidArgument},
			{"no descriptors", &rls.RateLimitRequest{Domain: e.domain}, codes.InvalidArgument},
			{"10,000 descriptors", &rls.RateLimitRequest{Domain: e.domain, Descriptors: many}, codes.InvalidArgument},
		} {
			if _, err := e.call(c.req); status.Code(err) != c.want {
				t.Errorf("%s: ShouldRateLimit = %v, want %v", c.name, err, c.want)
			}
		}
		r, err := e.call(&rls.RateLimitRequest{Domain: "no-such-domain", Descriptors: []*rlcommon.RateLimitDescriptor{desc("k", "v")}})
		if err != nil || codesOf(r) != "OK: OK" {
			t.Errorf("unknown domain = %v, %v; want OK: OK", r, err)
		}
		// More hits than the whole limit: over, and nothing held.
		r, err = e.call(&rls.RateLimitRequest{Domain: e.domain, HitsAddend: math.MaxUint32, Descriptors: []*rlcommon.RateLimitDescriptor{desc("k", "v")}})
		if err != nil || codesOf(r) != "OVER_LIMIT: OVER_LIMIT" {
			t.Fatalf("hits_addend 2^32-1 = %v, %v; want OVER_LIMIT", r, err)
		}
		if got := e.ask(desc("k", "v")).GetStatuses()[0].GetLimitRemaining(); got != 2 {
			t.Errorf("after the refused 2^32-1 hits: %d remaining, want 2", got)
		}
		// A descriptor's own hits_addend; 0 checks, taking nothing, as
		// Envoy asks at a request's start; more than 2^63 is over the limit,
		// not an error (a caller's header may set it).
		d := desc("k", "w")
		d.HitsAddend = wrapperspb.UInt64(2)
		if got := e.ask(d).GetStatuses()[0].GetLimitRemaining(); got != 1 {
			t.Errorf("descriptor hits_addend 2: %d remaining, want 1", got)
		}
		d.HitsAddend = wrapperspb.UInt64(0)
		for range 2 {
			if r := e.ask(d); codesOf(r) != "OK: OK" || r.GetStatuses()[0].GetLimitRemaining() != 1 {
				t.Errorf("descriptor hits_addend 0 with 1 left = %v, want OK with 1 left (nothing taken)", r)
			}
		}
		e.ask(desc("k", "w")) // the last one
		if r := e.ask(d); codesOf(r) != "OVER_LIMIT: OVER_LIMIT" {
			t.Errorf("descriptor hits_addend 0 with nothing left = %s, want OVER_LIMIT", codesOf(r))
		}
		huge := desc("k", "huge")
		huge.HitsAddend = wrapperspb.UInt64(math.MaxUint64)
		if r, err := e.call(&rls.RateLimitRequest{Domain: e.domain, Descriptors: []*rlcommon.RateLimitDescriptor{huge, desc("k", "other")}}); err != nil || codesOf(r) != "OVER_LIMIT: OVER_LIMIT OK" {
			t.Errorf("descriptor hits_addend 2^64-1 = %v, %v; want OVER_LIMIT, nothing taken from the other", r, err)
		}
		// Values of any characters are users of their own.
		for _, v := range []string{"", " ", "%", "|", "a|b", "a\tb", "\x00", "é", "e\u0301", strings.Repeat("x", 5000), " lead", "trail ", "\u00a0"} {
			r, err := e.call(&rls.RateLimitRequest{Domain: e.domain, Descriptors: []*rlcommon.RateLimitDescriptor{desc("k", v)}})
			if err != nil || codesOf(r) != "OK: OK" || r.GetStatuses()[0].GetLimitRemaining() != 2 {
				t.Errorf("value %q = %v, %v; want OK with 2 remaining (a user of its own)", v, r, err)
			}
		}
	})
}

func TestJSONAnswersAsGRPC(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1}
`)
		post := func(body string) (int, *rls.RateLimitResponse) {
			t.Helper()
			resp, err := http.Post(e.http+"/json", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var out rls.RateLimitResponse
			if resp.StatusCode == 200 || resp.StatusCode == 429 {
				if err := protojson.Unmarshal(raw, &out); err != nil {
					t.Fatalf("/json answered %s: %v", raw, err)
				}
			}
			return resp.StatusCode, &out
		}
		req := fmt.Sprintf(`{"domain": %q, "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]}`, e.domain)
		code, got := post(req)
		if code != 200 || codesOf(got) != "OK: OK" || got.GetStatuses()[0].GetLimitRemaining() != 0 {
			t.Fatalf("/json = %d %v, want 200 OK with 0 remaining", code, got)
		}
		grpcResp := e.ask(desc("k", "v"))
		code, got = post(req)
		if code != 429 || codesOf(got) != codesOf(grpcResp) || codesOf(got) != "OVER_LIMIT: OVER_LIMIT" {
			t.Fatalf("/json over the limit = %d %s, gRPC %s; want 429 OVER_LIMIT for both", code, codesOf(got), codesOf(grpcResp))
		}
		if code, _ := post(`{"domain": ""}`); code != 400 {
			t.Errorf("/json empty domain = %d, want 400", code)
		}
		if code, _ := post(`not json`); code != 400 {
			t.Errorf("/json not JSON = %d, want 400", code)
		}
		for path, want := range map[string]string{"/healthcheck": "OK", "/rlconfig": e.domain + ".k: unit=minute requests_per_unit=1",
			"/metrics": `tblimit_ratelimit_over_limit_total{descriptor="` + e.domain + `.k",domain="` + e.domain + `"} 2`} {
			resp, err := http.Get(e.http + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Contains(body, []byte(want)) {
				t.Errorf("GET %s = %d %s, want 200 with %q", path, resp.StatusCode, body, want)
			}
		}
	})
}

func TestHealthAndReflection(t *testing.T) {
	testenv.Each(t, testHealthAndReflection)
}

func testHealthAndReflection(t *testing.T, b *testenv.Backend) {
	e := start(t, b, nil, "domain: DOMAIN\ndescriptors: []\n")
	ctx := context.Background()
	h := healthpb.NewHealthClient(e.conn)
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %v, %v; want SERVING", svc, r, err)
		}
	}
	stream, err := reflectionpb.NewServerReflectionClient(e.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !strings.Contains(strings.Join(names, " "), "envoy.service.ratelimit.v3.RateLimitService") {
		t.Errorf("reflection lists %v, want the RateLimitService", names)
	}
}

func TestShutdownDrains(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		if b.Real {
			t.Skip("the stalled network is simulated on the embedded engine")
		}
		sc := simnet.New(b.Client, simnet.Model{Name: "free"})
		t.Cleanup(sc.Close)
		e := start(t, b, ledger.New(sc, ledger.WithNow(b.Now)), `
domain: DOMAIN
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 5}
`)
		sc.SetFaults(simnet.Faults{Stall: true})
		inFlight := make(chan *rls.RateLimitResponse, 1)
		go func() {
			r, err := e.call(&rls.RateLimitRequest{Domain: e.domain, Descriptors: []*rlcommon.RateLimitDescriptor{desc("k", "v")}})
			if err != nil {
				t.Errorf("the call in flight = %v, want an answer", err)
			}
			inFlight <- r
		}()
		waitFor(t, func() bool { return sc.Stats().Stalled > 0 })
		shut := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			shut <- e.srv.Shutdown(ctx)
		}()
		waitFor(t, func() bool {
			r, err := healthpb.NewHealthClient(e.conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
			return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING || status.Code(err) == codes.Unavailable
		})
		sc.SetFaults(simnet.Faults{})
		if r := <-inFlight; r == nil || codesOf(r) != "OK: OK" {
			t.Errorf("the call in flight at shutdown = %v, want OK", r)
		}
		if err := <-shut; err != nil {
			t.Errorf("Shutdown = %v", err)
		}
		if _, err := e.call(&rls.RateLimitRequest{Domain: e.domain, Descriptors: []*rlcommon.RateLimitDescriptor{desc("k", "v")}}); err == nil {
			t.Errorf("a call after shutdown was answered")
		}
	})
}

func TestUnavailable(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		if b.Real {
			t.Skip("the stalled network is simulated on the embedded engine")
		}
		const yaml = `
domain: DOMAIN
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 5}
`
		override := desc("k", "new")
		override.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_HOUR}
		for _, c := range []struct {
			name   string
			opts   []ratelimit.Option
			client []ledger.Option
			desc   *rlcommon.RateLimitDescriptor
			code   codes.Code
			answer string
			warm   bool // the user decided once before the stall
		}{
			{"closed", nil, nil, desc("k", "v"), codes.Unavailable, "", false},
			{"open", []ratelimit.Option{ratelimit.WithUnavailable(ledger.FailOpen)}, nil, desc("k", "v"), codes.OK, "OK: OK", false},
			// A new override's rule is made in the cluster: its call fails open too.
			{"open, a new override", []ratelimit.Option{ratelimit.WithUnavailable(ledger.FailOpen)}, nil, override, codes.OK, "OK: OK", false},
			// A client that denies while the cluster does not answer.
			{"closed client", nil, []ledger.Option{ledger.WithUnavailable(ledger.FailClosed)}, desc("k", "v"), codes.OK, "OVER_LIMIT: OK", true},
		} {
			sc := simnet.New(b.Client, simnet.Model{Name: "free"})
			t.Cleanup(sc.Close)
			e := start(t, b, ledger.New(sc, append([]ledger.Option{ledger.WithNow(b.Now), ledger.WithTimeout(time.Minute)}, c.client...)...), yaml, c.opts...)
			if c.warm {
				e.ask(c.desc)
			}
			sc.SetFaults(simnet.Faults{Stall: true})
			// The service answers 100 ms before the caller's deadline (a fifth of 500 ms):
			// the margin a loaded machine has to carry the answer back over gRPC.
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			r, err := e.rls.ShouldRateLimit(ctx, &rls.RateLimitRequest{Domain: e.domain, Descriptors: []*rlcommon.RateLimitDescriptor{c.desc}})
			cancel()
			if code := status.Code(err); code != c.code || c.code == codes.OK && codesOf(r) != c.answer {
				t.Errorf("%s: a stalled cluster = %v, %v; want %v %s", c.name, r, err, c.code, c.answer)
			}
			sc.SetFaults(simnet.Faults{})
		}
	})
}

func TestConcurrentCallersAdmitExactly(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 10}
`)
		const callers, calls, users = 256, 12, 64
		var mu sync.Mutex
		asked, admitted := map[string]int{}, map[string]int{}
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				z := rand.NewZipf(rand.New(rand.NewPCG(uint64(c), 1)), 1.1, 1, users-1)
				for range calls {
					u := fmt.Sprint("u", z.Uint64())
					r, err := e.call(&rls.RateLimitRequest{Domain: e.domain, Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", u)}})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					asked[u]++
					if r.GetOverallCode() == rls.RateLimitResponse_OK {
						admitted[u]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for u, n := range asked {
			if want := min(n, 10); admitted[u] != want {
				t.Errorf("user %s: %d admitted of %d asked, want %d", u, admitted[u], n, want)
			}
		}
	})
}

func TestClientLimiter(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: customer
    rate_limit: {name: per-customer, unit: minute, requests_per_unit: 2}
`)
		c, err := ratelimit.Dial(e.grpc)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l := c.Limiter(e.domain, "customer")
		ctx := context.Background()
		for i, want := range []uint64{1, 0} {
			r, err := l.Allow(ctx, "acme")
			if err != nil || !r.Allowed || len(r.Policies()) != 1 || r.Policies()[0].Decision.Remaining != want || r.Policies()[0].Policy != "per-customer" {
				t.Fatalf("Allow %d = %+v, %v; want allowed with %d remaining on per-customer", i, r, err, want)
			}
		}
		r, err := l.Allow(ctx, "acme")
		if err != nil || r.Allowed || r.DeniedBy != "per-customer" || r.RetryAfter <= 0 || r.RetryAfter > time.Minute {
			t.Fatalf("Allow over the limit = %+v, %v; want denied by per-customer, RetryAfter in (0, 1m]", r, err)
		}
		if r, err := l.AllowN(ctx, "other", 3); err != nil || r.Allowed || r.RetryAfter >= 0 {
			t.Errorf("AllowN(3) over a limit of 2 = %+v, %v; want denied, RetryAfter < 0 (never)", r, err)
		}
	})
}

func TestResponseHeaders(t *testing.T) {
	testenv.Each(t, testResponseHeaders)
}

func testResponseHeaders(t *testing.T, b *testenv.Backend) {
	e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: k
    rate_limit: {name: per-key, unit: minute, requests_per_unit: 4}
`, ratelimit.ResponseHeaders())
	r := e.ask(desc("k", "v"))
	got := map[string]string{}
	for _, h := range r.GetResponseHeadersToAdd() {
		got[h.GetKey()] = h.GetValue()
	}
	want := map[string]string{"RateLimit-Policy": `"per-key";q=4;w=60`, "RateLimit": `"per-key";r=3;t=60`}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestLimitOverride(t *testing.T) {
	testenv.Each(t, testLimitOverride)
}

func testLimitOverride(t *testing.T, b *testenv.Backend) {
	e := start(t, b, nil, "domain: DOMAIN\ndescriptors: []\n")
	d := desc("tenant", "t1")
	d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: 2 /* MINUTE */}
	if r := e.ask(proto.Clone(d).(*rlcommon.RateLimitDescriptor)); codesOf(r) != "OK: OK" || r.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() != 1 {
		t.Fatalf("first call under an override of 1 per minute = %v", r)
	}
	if r := e.ask(d); codesOf(r) != "OVER_LIMIT: OVER_LIMIT" {
		t.Errorf("second call = %s, want OVER_LIMIT", codesOf(r))
	}
	for _, unit := range []uint32{0, 8, 257} {
		d.Limit.Unit = typev3.RateLimitUnit(unit)
		if _, err := e.call(&rls.RateLimitRequest{Domain: e.domain, Descriptors: []*rlcommon.RateLimitDescriptor{d}}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("an override of unit %d = %v, want InvalidArgument", unit, err)
		}
	}
	// As envoyproxy/ratelimit: a domain not configured limits nothing,
	// overrides included.
	d.Limit.Unit = 2
	if r, err := e.call(&rls.RateLimitRequest{Domain: "not-configured", Descriptors: []*rlcommon.RateLimitDescriptor{d}}); err != nil || codesOf(r) != "OK: OK" {
		t.Errorf("an override on a domain not configured = %v, %v; want OK", r, err)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTwoServicesShareLimits(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		const yaml = `
domain: DOMAIN
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 25}
`
		// Two services, each with a ledger.Client of its own (its own view of
		// every user), on one cluster, as two processes would be.
		one := start(t, b, nil, yaml)
		two := start(t, b, ledger.New(b.Client, ledger.WithNow(b.Now)), yaml)
		two.domain = one.domain
		if err := two.svc.Load(context.Background(), config(t, one.domain, yaml)); err != nil {
			t.Fatal(err)
		}
		r1, _ := one.svc.Resource(mustRule(t, one.svc))
		r2, _ := two.svc.Resource(mustRule(t, two.svc))
		if r1 != r2 {
			t.Fatalf("one rule, two resources: %v and %v", r1, r2)
		}
		var mu sync.Mutex
		admitted := map[string]int{}
		var wg sync.WaitGroup
		for c := range 32 {
			e := []*env{one, two}[c%2]
			wg.Go(func() {
				for i := range 20 {
					u := fmt.Sprint("u", (c+i)%4)
					r, err := e.call(&rls.RateLimitRequest{Domain: e.domain, Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", u)}})
					if err != nil {
						t.Error(err)
						return
					}
					if r.GetOverallCode() == rls.RateLimitResponse_OK {
						mu.Lock()
						admitted[u]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		for u := range 4 {
			if got := admitted[fmt.Sprint("u", u)]; got != 25 {
				t.Errorf("user u%d: %d admitted by two services, want 25 (160 asked)", u, got)
			}
		}
	})
}

func mustRule(t *testing.T, svc *ratelimit.Service) *ratelimit.Rule {
	t.Helper()
	cfg, _ := svc.Config()
	if len(cfg.Rules()) == 0 {
		t.Fatal("no rule")
	}
	return cfg.Rules()[0]
}
