package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/sync/errgroup"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/recipes"
	"github.com/tblimit/tblimit/service"
)

// Service answers Envoy's rate limit requests (ShouldRateLimit) from the
// rules of its configuration, each kept as a tblimit resource: every rule
// (domain, levels, unit) is a ledger of its own, and every distinct set of
// descriptor values a lazy user of it, given the rule's limit on its first
// decision. The limited descriptors of one request are decided as one
// linked chain: all of them take their hits, or none does.
//
// A Service holds no state of its own besides its configuration: several
// services on one cluster share every limit. It is safe for concurrent use;
// Load swaps the configuration while calls go on.
type Service struct {
	rls.UnimplementedRateLimitServiceServer

	c     *ledger.Client
	group *recipes.Group
	opts  options
	state atomic.Pointer[state]
	stats *stats
	bound *service.Bound

	overridesMu sync.Mutex
	overrides   map[string]*rule // rules of Envoy's per-descriptor limits, by spec

	debts       debts       // charges past what remained, to charge before the next check
	provisional provisional // what checks before calls hold, until the charges after them
}

// state is a configuration in force and its rules' limiters.
type state struct {
	cfg    *Config
	rules  map[*Rule]*rule
	loaded time.Time
}

// rule is a Rule with its resource and limiter.
type rule struct {
	*Rule
	res     ledger.Resource
	limiter *recipes.Limiter
	// estimate is what the rule's calls cost lately (a charge_after rule's
	// checks hold it).
	estimate *estimate
	display  string // the name in RateLimit fields: Name, else Key
}

// Option configures a Service.
type Option func(*options)

type options struct {
	onUnavailable   *ledger.OnUnavailable // nil: the ledger.Client's decides
	responseHeaders bool
	maxWaiting      int
	bound           *service.Bound
}

// WithUnavailable sets what a call answers while the cluster does not
// answer, whatever the ledger.Client's own OnUnavailable, as
// recipes.WithUnavailable does for the service's decisions:
// ledger.ReturnError fails the call with gRPC status UNAVAILABLE, so that
// Envoy's failure_mode_deny decides; ledger.FailOpen answers OK;
// ledger.FailClosed answers with the overall code OVER_LIMIT (nothing is
// known of each descriptor). Without it, the Client's OnUnavailable
// decides. Any other value panics, as a programming error, when the
// Service is built (recipes.WithUnavailable checks it).
func WithUnavailable(p ledger.OnUnavailable) Option {
	return func(o *options) { o.onUnavailable = &p }
}

// ResponseHeaders adds the RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-10) of every limited descriptor
// to each response's response_headers_to_add.
func ResponseHeaders() Option { return func(o *options) { o.responseHeaders = true } }

// MaxWaiting bounds the calls deciding at once (default 4096): one more
// fails at once with RESOURCE_EXHAUSTED instead of queueing behind a
// cluster that does not keep up.
func MaxWaiting(n int) Option { return func(o *options) { o.maxWaiting = n } }

// SharedBound bounds the calls deciding at once by b, which other services
// served beside this one (tblimit.v1) share: MaxWaiting is then b's size.
func SharedBound(b *service.Bound) Option { return func(o *options) { o.bound = b } }

// New returns a service deciding on c, with no configuration until Load.
func New(c *ledger.Client, opts ...Option) (*Service, error) {
	o := options{maxWaiting: 4096}
	for _, opt := range opts {
		opt(&o)
	}
	if o.bound == nil {
		if o.maxWaiting <= 0 {
			return nil, fmt.Errorf("%w: MaxWaiting(%d): must be positive", ledger.ErrInvalidAmount, o.maxWaiting)
		}
		o.bound, _ = service.NewBound(o.maxWaiting)
	}
	var gopts []recipes.Option
	if o.onUnavailable != nil {
		gopts = append(gopts, recipes.WithUnavailable(*o.onUnavailable))
	}
	g, err := recipes.NewGroup(c, "ratelimit", gopts...)
	if err != nil {
		return nil, err
	}
	s := &Service{c: c, group: g, opts: o, stats: newStats(c, o.bound), bound: o.bound, overrides: map[string]*rule{}}
	s.state.Store(&state{cfg: &Config{domains: map[string]*level{}}, rules: map[*Rule]*rule{}})
	return s, nil
}

// Load puts cfg in force: it creates the resource of every rule that has
// a limit (idempotent; a rule's ledger is the same in every service given
// the same rule), then swaps it in for the calls that follow. On error the
// configuration in force stays. A reload that changes a rule's
// requests_per_unit keeps its ledger: each user gets the new limit on its
// next decision, units in flight kept (see recipes.Plans). One that
// changes its unit, levels or values is another rule, on another ledger.
func (s *Service) Load(ctx context.Context, cfg *Config) error {
	st := &state{cfg: cfg, rules: map[*Rule]*rule{}, loaded: time.Now()}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(64)
	for _, r := range cfg.rules {
		if r.Unlimited {
			continue
		}
		g.Go(func() error {
			rl, err := s.newRule(ctx, r)
			if err != nil {
				return fmt.Errorf("ratelimit: %s:%d: rule %s: %w", r.File, r.Line, r.Key, err)
			}
			mu.Lock()
			st.rules[r] = rl
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		s.stats.loads.WithLabelValues("error").Inc()
		return err
	}
	s.state.Store(st)
	s.stats.loads.WithLabelValues("success").Inc()
	return nil
}

// drain waits until no call is deciding: each holds a place in the bound.
func (s *Service) drain() { s.bound.Drain() }

// Config returns the configuration in force and when it was loaded.
func (s *Service) Config() (*Config, time.Time) {
	st := s.state.Load()
	return st.cfg, st.loaded
}

// Resource returns the resource that keeps rule r's limit in the
// configuration in force (false for an unlimited rule, or one not in it).
func (s *Service) Resource(r *Rule) (ledger.Resource, bool) {
	rl, ok := s.state.Load().rules[r]
	if !ok {
		return ledger.Resource{}, false
	}
	return rl.res, true
}

// Resource returns the resource that keeps r's limit before any collision:
// its name and the ledger derived from the rule (a service in force says
// which it took, see Service.Resource; another rule's resource already on
// that ledger moves it to the next free one). An unlimited rule has none.
func (r *Rule) Resource() (ledger.Resource, bool) {
	if r.Unlimited {
		return ledger.Resource{}, false
	}
	return resourceOf(r.spec, r.Unit), true
}

// probes is how many ledgers a rule tries, from the one its spec names,
// before it gives up on finding one that is free or its own.
const probes = 16

// newRule creates r's resource (on the first ledger from its spec's that
// is free or holds r already) and its limiter.
func (s *Service) newRule(ctx context.Context, r *Rule) (*rule, error) {
	res := resourceOf(r.spec, r.Unit)
	var err error
	for range probes {
		if err = s.c.CreateResource(ctx, res); !errors.Is(err, ledger.ErrResourceMismatch) {
			break
		}
		res.Ledger = nextLedger(res.Ledger)
	}
	if err != nil {
		return nil, err
	}
	var opts []recipes.Option
	if r.ShadowMode {
		opts = append(opts, recipes.Shadow())
	}
	l, err := recipes.NewLimiter(s.c, r.Key, []recipes.Policy{{Name: res.Name, Ledger: res.Ledger,
		Limit: recipes.Per(0, res.Window), Lazy: true}}, opts...)
	if err != nil {
		return nil, err
	}
	display := r.Name
	if display == "" {
		display = r.Key
	}
	return &rule{Rule: r, res: res, limiter: l, display: display, estimate: &estimate{}}, nil
}

// resourceOf is the resource of a rule spec: its name and ledger derive
// from the spec's SHA-256 (ledgers from 2^31 up, clear of those people
// number by hand), its default limit is 0 (every decision gives the user
// the rule's limit, so that a reload changes no definition).
func resourceOf(spec string, u TimeUnit) ledger.Resource {
	sum := sha256.Sum256([]byte(spec))
	name := "rl" + strings.ToLower(base32.StdEncoding.EncodeToString(sum[:7]))[:10]
	return ledger.Resource{Name: name, Ledger: 1<<31 | binary.BigEndian.Uint32(sum[8:12])&^(1<<31),
		Kind: ledger.KindRequests, Window: u.Window(), Lazy: true}
}

// nextLedger is the ledger probed after l, within the service's range.
func nextLedger(l uint32) uint32 {
	if l == math.MaxUint32 {
		return 1 << 31
	}
	return l + 1
}
