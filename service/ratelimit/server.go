package ratelimit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/service"
)

// serviceName is the gRPC service health reports on, besides "".
const serviceName = "envoy.service.ratelimit.v3.RateLimitService"

// Server serves a Service over gRPC (Envoy's RateLimitService, the
// standard health service and server reflection) and HTTP (POST /json,
// GET /healthcheck, /metrics and /rlconfig). Build it with NewServer.
type Server struct {
	svc     *Service
	grpc    *grpc.Server
	health  *health.Server
	http    *http.Server
	serving atomic.Bool
}

// ServerOptions configure a Server.
type ServerOptions struct {
	// TLS, when not nil, serves both listeners over TLS (see TLSFiles).
	TLS *tls.Config
	// Registry has the metrics /metrics serves; the Service's own are
	// registered on it. Nil: a new registry with the Service's and the
	// Go runtime's.
	Registry *prometheus.Registry
	// MaxConcurrentStreams bounds the gRPC calls of one connection (0:
	// gRPC's default).
	MaxConcurrentStreams uint32
	// GRPCOptions are added to the gRPC server's own: a grpc.StatsHandler
	// that traces every call, say (package service/tracing).
	GRPCOptions []grpc.ServerOption
	// WrapHTTP, when not nil, wraps the HTTP server's handler: to trace
	// every request, say.
	WrapHTTP func(http.Handler) http.Handler
	// Register, when not nil, is given the gRPC server and the HTTP mux
	// before they serve, to serve more beside Envoy's protocol on the same
	// listeners (tblimit serve --api registers tblimit.v1's
	// api.Service.Register).
	Register func(grpc.ServiceRegistrar, *http.ServeMux)
}

// streamWorkers is how many goroutines the gRPC server keeps to run calls
// on; a call that finds none idle runs on a goroutine of its own, as every
// call does without them. A decision goes deep (gRPC, the service, the
// recipes, the Client, the engine and its store) and a new goroutine's
// stack grew for each one: 10% of the CPU of tblimit serve at 256 callers
// went to copying stacks. With workers (tblimit serve on a data file,
// Envoy's ShouldRateLimit over loopback, 100,000 Zipf keys, four rounds
// interleaved, medians) a decision took 0.95x the CPU at 256 callers and
// 0.98x at 16, and 256 callers decided 1.02x to 1.04x as fast. Decisions
// wait for the engine's shared fsyncs, so many run at once: a few hundred
// kept goroutines cost little (idle, their stacks shrink).
const streamWorkers = 256

// NewServer returns a server of svc. Its gRPC server keeps its goroutines
// (streamWorkers) from the start: Shutdown releases them, served or not.
func NewServer(svc *Service, o ServerOptions) (*Server, error) {
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if err := reg.Register(svc); err != nil {
		return nil, fmt.Errorf("ratelimit: metrics: %w", err)
	}
	gopts := []grpc.ServerOption{grpc.ForceServerCodecV2(newBytesCodec()), grpc.NumStreamWorkers(streamWorkers)}
	if o.TLS != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	if o.MaxConcurrentStreams > 0 {
		gopts = append(gopts, grpc.MaxConcurrentStreams(o.MaxConcurrentStreams))
	}
	gopts = append(gopts, o.GRPCOptions...)
	s := &Server{svc: svc, grpc: grpc.NewServer(gopts...), health: health.NewServer()}
	rls.RegisterRateLimitServiceServer(s.grpc, svc)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.setServing(true)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /json", s.serveJSON)
	mux.HandleFunc("GET /healthcheck", s.serveHealth)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /rlconfig", s.serveConfig)
	if o.Register != nil {
		o.Register(s.grpc, mux)
	}
	var handler http.Handler = mux
	if o.WrapHTTP != nil {
		handler = o.WrapHTTP(mux)
	}
	s.http = &http.Server{Handler: handler, TLSConfig: o.TLS, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	return s, nil
}

func (s *Server) setServing(on bool) {
	s.serving.Store(on)
	st := healthpb.HealthCheckResponse_SERVING
	if !on {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(serviceName, st)
}

// Serve serves gRPC on grpcLn and HTTP on httpLn (either may be nil) until
// Shutdown; it returns the first error of either that is not a shutdown.
func (s *Server) Serve(grpcLn, httpLn net.Listener) error {
	errs := make(chan error, 2)
	n := 0
	if grpcLn != nil {
		n++
		go func() { errs <- s.grpc.Serve(grpcLn) }()
	}
	if httpLn != nil {
		n++
		go func() {
			var err error
			if s.http.TLSConfig != nil {
				err = s.http.ServeTLS(httpLn, "", "")
			} else {
				err = s.http.Serve(httpLn)
			}
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				s.Shutdown(ctx)
			}()
		}
	}
	return first
}

// Shutdown stops accepting calls (health says NOT_SERVING at once), lets
// the calls in flight finish until ctx is done, then closes every
// connection.
//
// When it returns, no call is still deciding: those cut off at the deadline
// have returned (their callers' connections closed), so the ledger.Client
// under the Service may be closed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.setServing(false)
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	herr := s.http.Shutdown(ctx)
	if herr != nil {
		s.http.Close() // the deadline passed: close what is still open
	}
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
	s.svc.drain()
	if herr != nil && !errors.Is(herr, context.DeadlineExceeded) && !errors.Is(herr, context.Canceled) {
		return herr
	}
	return ctx.Err()
}

// maxJSONBody bounds a /json request's body.
const maxJSONBody = 4 << 20

// serveJSON answers POST /json: the protobuf JSON of a RateLimitRequest,
// answered with that of a RateLimitResponse, 200 when OK, 429 when over
// the limit; a malformed request is 400, an unanswered cluster 503.
func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var req rls.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		http.Error(w, "the body is not a RateLimitRequest in JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := s.svc.ShouldRateLimit(r.Context(), &req)
	if err != nil {
		st := status.Convert(err)
		http.Error(w, st.Message(), service.HTTPStatus(st.Code()))
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if resp.GetOverallCode() == rls.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	w.Write(out)
}

// serveHealth answers GET /healthcheck: 200 OK while serving, 500 once
// shutting down.
func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	if !s.serving.Load() {
		http.Error(w, "shutting down", http.StatusInternalServerError)
		return
	}
	io.WriteString(w, "OK\n")
}

// serveConfig answers GET /rlconfig: the configuration in force, one line
// per rule.
func (s *Server) serveConfig(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	WriteRules(w, s.svc)
}

// WriteRules writes svc's configuration in force as GET /rlconfig shows
// it: Config.WriteRules's lines, the first saying also when it was loaded,
// each rule with the resource that keeps it in svc (Service.Resource).
func WriteRules(w io.Writer, svc *Service) {
	cfg, loaded := svc.Config()
	writeRules(w, cfg, loaded, svc.Resource)
}

// WriteRules writes c as GET /rlconfig shows a configuration (see
// WriteRules), which tblimit serve --check-config prints: a comment line
// counting its rules, domains and files, then one line per rule, in file
// order, with its key, limit, flags, the resource that keeps it and where
// it was defined. The resource is the one Rule.Resource names, which a
// Service puts the rule on unless another rule's resource holds that
// ledger already.
func (c *Config) WriteRules(w io.Writer) {
	writeRules(w, c, time.Time{}, (*Rule).Resource)
}

// writeRules is the one formatter of a configuration's rules, so that
// --check-config and /rlconfig say the same of the same file; loaded is
// zero for a configuration not in force.
func writeRules(w io.Writer, c *Config, loaded time.Time, resource func(*Rule) (ledger.Resource, bool)) {
	fmt.Fprintf(w, "# %d rule(s) in %d domain(s) from %d file(s)", len(c.rules), len(c.domains), len(c.files))
	if !loaded.IsZero() {
		fmt.Fprintf(w, ", loaded %s", loaded.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	for _, r := range c.rules {
		res, ok := resource(r)
		fmt.Fprintln(w, describeRule(r, res, ok))
	}
}

// describeRule is a rule's line: res, when ok, is the resource that keeps it.
func describeRule(r *Rule, res ledger.Resource, ok bool) string {
	s := r.Key + ": "
	if r.Unlimited {
		s += "unlimited"
	} else {
		s += fmt.Sprintf("unit=%s requests_per_unit=%d", r.Unit, r.RequestsPerUnit)
	}
	if r.ShadowMode {
		s += " shadow_mode"
	}
	if r.ChargeAfter {
		s += " charge_after"
	}
	if r.ReserveKey != "" {
		s += " reserve_key=" + r.ReserveKey + " settle_key=" + r.SettleKey
	}
	if r.Name != "" {
		s += " name=" + r.Name
	}
	for _, rep := range r.Replaces {
		s += " replaces=" + rep
	}
	if ok {
		s += fmt.Sprintf(" resource=%s ledger=%d", res.Name, res.Ledger)
	}
	return s + fmt.Sprintf(" (%s:%d)", r.File, r.Line)
}

// TLSFiles is a server's certificate and key, and for mutual TLS the CA
// that client certificates must be signed by, as files. Config reads them
// again when any of them changes (checked at most once a second, on a new
// connection), so that a rotated certificate needs no restart.
type TLSFiles struct {
	Cert, Key, ClientCA string

	mu      sync.Mutex
	checked time.Time
	stamp   string
	cfg     *tls.Config
}

// Config returns the TLS configuration of the files, reloaded as they
// change; it fails if they cannot be read now.
func (f *TLSFiles) Config() (*tls.Config, error) {
	if _, err := f.current(); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return f.current()
	}}, nil
}

// current is the configuration of the files as they are now.
func (f *TLSFiles) current() (*tls.Config, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cfg != nil && time.Since(f.checked) < time.Second {
		return f.cfg, nil
	}
	f.checked = time.Now()
	stamp := ""
	for _, p := range []string{f.Cert, f.Key, f.ClientCA} {
		if p == "" {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			if f.cfg != nil {
				return f.cfg, nil // mid-rotation: keep serving the last good files
			}
			return nil, fmt.Errorf("ratelimit: TLS: %w", err)
		}
		stamp += fmt.Sprintf("%s %d %d;", p, st.Size(), st.ModTime().UnixNano())
	}
	if f.cfg != nil && stamp == f.stamp {
		return f.cfg, nil
	}
	cfg, err := f.load()
	if err != nil {
		if f.cfg != nil {
			return f.cfg, nil
		}
		return nil, err
	}
	f.cfg, f.stamp = cfg, stamp
	return cfg, nil
}

func (f *TLSFiles) load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: TLS certificate %s, key %s: %w", f.Cert, f.Key, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("ratelimit: TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ratelimit: TLS client CA %s: no PEM certificate in it", f.ClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
