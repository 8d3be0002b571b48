// Package serve is tblimit serve: Envoy's rate limit service, deciding on tblimit limits.
package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/service"
	"github.com/tblimit/tblimit/service/api"
	"github.com/tblimit/tblimit/service/ratelimit"
)

// serveOptions are tblimit serve's: the rate limit service's flags and what it
// needs from the process.
type serveOptions struct {
	// Open opens the cluster, or the embedded engine, writing its notices
	// and warnings as lines to notices.
	Open   func(notices io.Writer, opts ...ledger.Option) (*ledger.Client, func(), error)
	Out    io.Writer
	ErrOut io.Writer
	// Ready, when not nil, is told the addresses the listeners got (tests
	// listen on port 0).
	Ready func(grpcAddr, httpAddr string)
	// Reload delivers SIGHUP.
	Reload func() (<-chan struct{}, func())

	Config          string
	CheckConfig     string
	GRPCAddr        string
	HTTPAddr        string
	Unavailable     string
	ResponseHeaders bool
	API             bool
	APITokens       string
	APIInsecure     bool
	TLSCert         string
	TLSKey          string
	TLSClientCA     string
	MaxWaiting      int
	UserCache       int
	ShutdownTimeout time.Duration
	ReloadInterval  time.Duration
	LogFormat       string
	LogLevel        string
	// RequireRequestID refuses money and reservation calls without a request_id.
	RequireRequestID bool
}

// logLevels are the levels --log-level takes.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

func knownLevel(s string) bool { _, ok := logLevels[s]; return ok }

// EnvFlags are serve's flags that TBLIMIT_<FLAG> sets.
var EnvFlags = []string{"config", "grpc-addr", "http-addr", "unavailable", "response-headers", "tls-cert", "tls-key",
	"tls-client-ca", "max-waiting", "user-cache", "shutdown-timeout", "log-format", "log-level", "api", "api-tokens", "api-insecure", "require-request-id"}

// NewCmdServe returns tblimit serve; runF, when not nil, runs instead of serveRun.
func NewCmdServe(f *cmdutil.Factory, runF func(context.Context, *serveOptions) error) *cobra.Command {
	opts := &serveOptions{Out: f.Out, ErrOut: f.ErrOut, Reload: sighup,
		Open: func(notices io.Writer, lopts ...ledger.Option) (*ledger.Client, func(), error) {
			return f.Global.Open(f.Clock, notices, lopts...)
		}}
	cmd := &cobra.Command{
		Use:   "serve --config PATH | --api",
		Short: "Serve Envoy's rate limit protocol (gRPC and HTTP) from tblimit limits",
		Long: `serve is a rate limit service: Envoy's envoy.service.ratelimit.v3.RateLimitService
over gRPC (with grpc.health.v1 and server reflection), and over HTTP POST /json
(the same request in JSON), GET /healthcheck, GET /metrics (Prometheus) and
GET /rlconfig (the configuration in force). With --api, tblimit's own API too,
tblimit.v1.LimitService, on both listeners (gRPC, and HTTP POST /v1/...):
decisions, payments, reservations, and provisioning (resources, users, limits)
while it runs. --api without --config serves tblimit.v1 alone.

tblimit.v1 moves money: with --api-tokens FILE, each call needs a bearer token
(authorization: Bearer <token>) that FILE allows to decide, read, fund, reset or
admin (docs/api.md#authorization has the format); FILE is reloaded when it
changes and on SIGHUP, and a file with no tokens, or naming a resource the
cluster does not have, is warned of. --require-request-id refuses payments,
funds and reservations without a request_id. Without --api-tokens the API is open, and serve --api refuses
to start on a listener that is not loopback (127.0.0.1, [::1], localhost)
unless --api-insecure says to serve it open there. Envoy's protocol checks
no credentials: it is for gateways on a private network.

--config is a YAML file, or a directory of them, in envoyproxy/ratelimit's format.
Each rule becomes a tblimit resource and each distinct set of descriptor values a
lazy user; the limited descriptors of a request are decided as one linked chain,
all-or-nothing, in a sliding window. The configuration is watched and reloaded
when it changes (and on SIGHUP); a bad file is refused and the last good one stays.
--check-config PATH only validates a configuration: exit 0 when it loads, printing
its rules as GET /rlconfig would, 2 when not.

Without --addresses, the embedded engine's data file serves, which one process
may hold at a time; several serve processes share a TigerBeetle cluster. SIGTERM
or SIGINT stops accepting calls, lets those in flight finish (--shutdown-timeout)
and closes the cluster client.

OpenTelemetry traces are off unless OTEL_TRACES_EXPORTER (otlp, console) or
OTEL_EXPORTER_OTLP_ENDPOINT is set; the other OTEL_* variables apply.

The log goes to stderr, as text (key=value) or JSON lines (--log-format), from
--log-level up.

Flags also come from TBLIMIT_<FLAG> (TBLIMIT_CONFIG, TBLIMIT_GRPC_ADDR, ...).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.FromEnv(cmd.Flags(), EnvFlags); err != nil {
				return err
			}
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return serveRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Config, "config", "", "the configuration: a YAML file or a directory of them, in envoyproxy/ratelimit's format [env]")
	fl.StringVar(&opts.CheckConfig, "check-config", "", "validate this configuration and exit: 0 when it loads, 2 when not")
	fl.StringVar(&opts.GRPCAddr, "grpc-addr", "127.0.0.1:8081", "the gRPC listener's address [env]")
	fl.StringVar(&opts.HTTPAddr, "http-addr", "127.0.0.1:8080", "the HTTP listener's address (\"\": none) [env]")
	fl.StringVar(&opts.Unavailable, "unavailable", "error", "when the cluster does not answer: error (gRPC UNAVAILABLE, so that Envoy's failure_mode_deny decides), open (OK) or closed (OVER_LIMIT) [env]")
	fl.BoolVar(&opts.API, "api", false, "serve tblimit's own API, tblimit.v1 (acquire, pay, fund, reserve, reset, history...), on both listeners [env]")
	fl.StringVar(&opts.APITokens, "api-tokens", "", "tblimit.v1 calls need a bearer token this YAML file allows (reloaded when it changes, and on SIGHUP) [env]")
	fl.BoolVar(&opts.RequireRequestID, "require-request-id", false, "tblimit.v1 refuses a Pay, Fund, Reserve or ReserveAll without a request_id (REQUEST_ID_REQUIRED): a client that drops it by accident cannot move money twice [env]")
	fl.BoolVar(&opts.APIInsecure, "api-insecure", false, "serve tblimit.v1 without --api-tokens on listeners that are not loopback: open to anyone who reaches them [env]")
	fl.BoolVar(&opts.ResponseHeaders, "response-headers", false, "add the RateLimit-Policy and RateLimit fields (draft-ietf-httpapi-ratelimit-headers-10) to every response [env]")
	fl.StringVar(&opts.TLSCert, "tls-cert", "", "serve both listeners over TLS with this certificate (PEM), reloaded when it changes [env]")
	fl.StringVar(&opts.TLSKey, "tls-key", "", "the TLS certificate's private key (PEM) [env]")
	fl.StringVar(&opts.TLSClientCA, "tls-client-ca", "", "mutual TLS: require client certificates signed by this CA (PEM) [env]")
	fl.IntVar(&opts.MaxWaiting, "max-waiting", 4096, "the most calls deciding at once, of Envoy's protocol and tblimit.v1 together; more fail at once with RESOURCE_EXHAUSTED [env]")
	fl.IntVar(&opts.UserCache, "user-cache", ledger.DefaultUserCache, "the most users (descriptor value sets, tblimit.v1 users) whose limits and units in flight the service keeps in memory, about 0.4 KB each; one past it decides through the cluster as a new one does [env]")
	fl.DurationVar(&opts.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "on SIGTERM, how long calls in flight may take to finish [env]")
	fl.DurationVar(&opts.ReloadInterval, "reload-interval", time.Second, "how often the configuration's files are checked for changes")
	fl.StringVar(&opts.LogFormat, "log-format", "text", "the log's format on stderr: text (key=value) or json (one object a line) [env]")
	fl.StringVar(&opts.LogLevel, "log-level", "info", "the least level logged: debug, info, warn or error [env]")
	return cmd
}

func (o *serveOptions) validate() error {
	switch {
	case o.CheckConfig != "":
		return nil
	case o.Config == "" && !o.API:
		return cmdutil.Usagef("--config is required: a YAML file or directory in envoyproxy/ratelimit's format (or --api alone, to serve tblimit.v1 only)")
	case o.Unavailable != ledger.ReturnError.String() && o.Unavailable != ledger.FailOpen.String() && o.Unavailable != ledger.FailClosed.String():
		return cmdutil.Usagef("--unavailable %q: want error, open or closed", o.Unavailable)
	case (o.TLSCert == "") != (o.TLSKey == ""):
		return cmdutil.Usagef("--tls-cert and --tls-key go together")
	case o.TLSClientCA != "" && o.TLSCert == "":
		return cmdutil.Usagef("--tls-client-ca needs --tls-cert and --tls-key")
	case o.MaxWaiting <= 0:
		return cmdutil.Usagef("--max-waiting %d: must be positive", o.MaxWaiting)
	case o.UserCache <= 0:
		return cmdutil.Usagef("--user-cache %d: must be positive", o.UserCache)
	case o.ShutdownTimeout <= 0:
		return cmdutil.Usagef("--shutdown-timeout %s: must be positive", o.ShutdownTimeout)
	case o.ReloadInterval <= 0:
		return cmdutil.Usagef("--reload-interval %s: must be positive", o.ReloadInterval)
	case o.GRPCAddr == "" && o.HTTPAddr == "":
		return cmdutil.Usagef("--grpc-addr and --http-addr are both empty: nothing to serve")
	case o.LogFormat != "text" && o.LogFormat != "json":
		return cmdutil.Usagef("--log-format %q: want text or json", o.LogFormat)
	case !knownLevel(o.LogLevel):
		return cmdutil.Usagef("--log-level %q: want debug, info, warn or error", o.LogLevel)
	case (o.APITokens != "" || o.APIInsecure || o.RequireRequestID) && !o.API:
		return cmdutil.Usagef("--api-tokens, --api-insecure and --require-request-id need --api")
	}
	if o.API && o.APITokens == "" && !o.APIInsecure {
		for _, l := range []struct{ flag, addr string }{{"--grpc-addr", o.GRPCAddr}, {"--http-addr", o.HTTPAddr}} {
			if l.addr != "" && !loopback(l.addr) {
				return cmdutil.Usagef("--api without --api-tokens serves tblimit.v1, which moves money, open to anyone: %s %s is not loopback; "+
					"give --api-tokens FILE (docs/api.md#authorization), or --api-insecure to serve it open there", l.flag, l.addr)
			}
		}
	}
	return nil
}

// loopback reports whether a listener's address is on loopback only
// (cmdutil.Loopback).
func loopback(addr string) bool { return cmdutil.Loopback(addr) }

func serveRun(ctx context.Context, opts *serveOptions) error {
	if opts.CheckConfig != "" {
		return checkConfig(opts)
	}
	log := newLogger(opts.ErrOut, opts.LogFormat, opts.LogLevel)
	var cfg *ratelimit.Config // nil: tblimit.v1 alone, no rules
	if opts.Config != "" {
		var err error
		if cfg, err = ratelimit.LoadConfig(opts.Config); err != nil {
			return err
		}
	}
	var tlsCfg *tls.Config
	var err error
	if opts.TLSCert != "" {
		files := &ratelimit.TLSFiles{Cert: opts.TLSCert, Key: opts.TLSKey, ClientCA: opts.TLSClientCA}
		if tlsCfg, err = files.Config(); err != nil {
			return err
		}
	}
	tr, stopTracing, err := startTracing(ctx, opts)
	if err != nil {
		return err
	}
	defer stopTracing() // after the Client closed: its last requests' spans have ended
	lopts := tr.LedgerOptions()
	if opts.UserCache > 0 { // 0 (options made by a program, not from flags): the ledger's default
		lopts = append(lopts, ledger.WithUserCache(opts.UserCache))
	}
	c, done, err := opts.Open(noticeLog{log}, lopts...)
	if errors.Is(err, embedded.ErrBusy) {
		return fmt.Errorf("%w (the embedded engine's data file serves one process at a time: another tblimit serve may hold it; run several on a TigerBeetle cluster, with --addresses)", errors.Unwrap(err))
	}
	if err != nil {
		return err
	}
	defer done()
	// The default, error, fails the call with UNAVAILABLE, and Envoy's
	// failure_mode_deny closes (or opens); closed answers OVER_LIMIT,
	// which Envoy and its metrics take for a limit.
	onUnavailable := ledger.ReturnError
	for _, p := range []ledger.OnUnavailable{ledger.FailOpen, ledger.FailClosed} {
		if opts.Unavailable == p.String() {
			onUnavailable = p
		}
	}
	sopts := []ratelimit.Option{ratelimit.WithUnavailable(onUnavailable)}
	if opts.ResponseHeaders {
		sopts = append(sopts, ratelimit.ResponseHeaders())
	}
	// One bound for both protocols: --max-waiting calls deciding at once,
	// Envoy's and tblimit.v1's together.
	bound, err := service.NewBound(opts.MaxWaiting)
	if err != nil {
		return err
	}
	svc, err := ratelimit.New(c, append(sopts, ratelimit.SharedBound(bound))...)
	if err != nil {
		return err
	}
	if cfg != nil {
		if err := svc.Load(ctx, cfg); err != nil {
			return err
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sv := ratelimit.ServerOptions{TLS: tlsCfg, Registry: reg}
	var tokens *api.Tokens
	if opts.API {
		var aopts []api.Option
		if opts.APITokens != "" {
			if tokens, err = api.LoadTokens(opts.APITokens); err != nil {
				return err
			}
			warnTokens(ctx, log, c, tokens)
			reg.MustRegister(tokens)
			aopts = append(aopts, api.Authorize(func(ctx context.Context, call api.Call) error {
				err := tokens.Authorize(ctx, call)
				if err != nil {
					log.Debug("API call refused", "method", call.Method, "err", err)
				}
				return err
			}))
		}
		if opts.RequireRequestID {
			aopts = append(aopts, api.RequireRequestID())
		}
		aopts = append(aopts, api.WithBound(bound))
		as := api.New(c, aopts...)
		reg.MustRegister(as)
		sv.Register = as.Register
	}
	srv, err := ratelimit.NewServer(svc, tr.Server(sv))
	if err != nil {
		return err
	}
	return serveOn(ctx, opts, log, svc, srv, c, tokens)
}

// newLogger returns serve's log, written to w in format (text, or json:
// one object a line) from level up ("": info).
func newLogger(w io.Writer, format, level string) *slog.Logger {
	hopts := &slog.HandlerOptions{Level: logLevels[level]}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, hopts))
	}
	return slog.New(slog.NewTextHandler(w, hopts))
}

// noticeLog logs the lines the embedded engine's guard writes
// ("tblimit: warning: ...", "tblimit: notice: ...") as records of serve's
// log, so that a JSON log stays JSON lines. Its writers write whole lines.
type noticeLog struct{ log *slog.Logger }

func (n noticeLog) Write(p []byte) (int, error) {
	for line := range strings.Lines(string(p)) {
		line = strings.TrimSuffix(line, "\n")
		if msg, ok := strings.CutPrefix(line, "tblimit: warning: "); ok {
			n.log.Warn(msg)
		} else if line != "" {
			n.log.Info(strings.TrimPrefix(line, "tblimit: notice: "))
		}
	}
	return len(p), nil
}

// serveOn listens, serves until ctx ends, and drains.
func serveOn(ctx context.Context, opts *serveOptions, log *slog.Logger, svc *ratelimit.Service, srv *ratelimit.Server, c *ledger.Client, tokens *api.Tokens) error {
	grpcLn, err := listen(opts.GRPCAddr, "--grpc-addr")
	if err != nil {
		return err
	}
	httpLn, err := listen(opts.HTTPAddr, "--http-addr")
	if err != nil {
		if grpcLn != nil {
			grpcLn.Close()
		}
		return err
	}
	reload, stopReload := opts.Reload()
	defer stopReload()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if opts.Config != "" {
		go ratelimit.Watch(watchCtx, svc, opts.Config, opts.ReloadInterval, reload, func(err error) {
			if err != nil {
				log.Error("configuration refused; the last good one stays in force", "err", err)
				return
			}
			log.Info("configuration reloaded", "config", opts.Config)
		})
	}
	if tokens != nil {
		reloadTokens, stopReloadTokens := opts.Reload()
		defer stopReloadTokens()
		go watchTokens(watchCtx, log, c, tokens, opts.APITokens, opts.ReloadInterval, reloadTokens)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(grpcLn, httpLn) }()
	ga, ha := addr(grpcLn), addr(httpLn)
	log.Info("serving", servingAttrs(opts, ga, ha, len(mustConfig(svc).Rules()), tokens)...)
	if opts.Ready != nil {
		opts.Ready(ga, ha)
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: draining calls in flight", "timeout", opts.ShutdownTimeout)
	// The process's context is done: the drain gets a deadline of its own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("calls still in flight at the deadline were cut off", "err", err)
	}
	<-served
	return nil
}

func mustConfig(svc *ratelimit.Service) *ratelimit.Config {
	cfg, _ := svc.Config()
	return cfg
}

// listen listens on addr, or returns nil for "".
func listen(addr, flag string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	return ln, nil
}

func addr(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// watchTokens keeps the API's tokens those of their file: it reads the
// file every interval, and at once whenever reload receives (SIGHUP). A
// file refused leaves the last good tokens in force. It returns when ctx
// is done.
func watchTokens(ctx context.Context, log *slog.Logger, c *ledger.Client, tokens *api.Tokens, path string, interval time.Duration, reload <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		forced := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-reload:
			forced = true
		}
		changed, err := tokens.Reload(forced)
		switch {
		case err != nil:
			log.Error("API tokens refused; the last good ones stay in force", "err", err)
		case changed:
			log.Info("API tokens reloaded", "tokens", path, "count", tokens.Len())
			warnTokens(ctx, log, c, tokens)
		}
	}
}

// servingAttrs are the "serving" line's: the listeners, Envoy's rules,
// and whether tblimit.v1 is served, under which tokens.
func servingAttrs(opts *serveOptions, grpcAddr, httpAddr string, rules int, tokens *api.Tokens) []any {
	attrs := []any{"grpc", grpcAddr, "http", httpAddr, "config", opts.Config, "rules", rules}
	switch {
	case !opts.API:
		attrs = append(attrs, "api", "off")
	case tokens != nil:
		attrs = append(attrs, "api", "on", "api_tokens", opts.APITokens, "tokens", tokens.Len())
	default:
		attrs = append(attrs, "api", "open (no --api-tokens)")
	}
	if opts.RequireRequestID {
		attrs = append(attrs, "require_request_id", true)
	}
	return attrs
}

// warnTokens warns of a token file that lets nothing through (no tokens)
// or names resources the cluster does not have (a typo, or one yet to be
// created): both are taken, and both are what an operator wants to know.
func warnTokens(ctx context.Context, log *slog.Logger, c *ledger.Client, tokens *api.Tokens) {
	if tokens.Len() == 0 {
		log.Warn("the API token file has no tokens: every tblimit.v1 call is refused", "api_tokens", tokens.Path())
		return
	}
	all, err := c.Resources(ctx)
	if err != nil {
		log.Warn("could not check the API tokens' resources", "err", err)
		return
	}
	have := map[string]bool{}
	for _, r := range all {
		have[r.Name] = true
		have[strconv.FormatUint(uint64(r.Ledger), 10)] = true
	}
	for _, name := range tokens.Resources() {
		if !have[name] {
			log.Warn("the API token file names a resource the cluster does not have", "resource", name, "api_tokens", tokens.Path())
		}
	}
}

// sighup delivers SIGHUP until stopped.
func sighup() (<-chan struct{}, func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	out := make(chan struct{}, 1)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-sig:
				select {
				case out <- struct{}{}:
				default:
				}
			case <-stop:
				return
			}
		}
	}()
	return out, func() { signal.Stop(sig); close(stop) }
}

// checkConfig validates opts.CheckConfig: exit 0 with the configuration
// on stdout as GET /rlconfig would show it in force (but for when it was
// loaded), or the problem and exit 2.
func checkConfig(opts *serveOptions) error {
	cfg, err := ratelimit.LoadConfig(opts.CheckConfig)
	if err != nil {
		return cmdutil.AsUsage(err)
	}
	cfg.WriteRules(opts.Out)
	return nil
}
