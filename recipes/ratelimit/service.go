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

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/recipes"
)

// MaxDescriptors is the most descriptors one request may carry.
const MaxDescriptors = 8189

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

	c       *ledger.Client
	group   *recipes.Group
	opts    options
	state   atomic.Pointer[state]
	stats   *stats
	waiting chan struct{}

	overridesMu sync.Mutex
	overrides   map[string]*rule // rules of Envoy's per-descriptor limits, by spec
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
	display string // the name in RateLimit fields: Name, else Key
}

// Option configures a Service.
type Option func(*options)

type options struct {
	onUnavailable   *ledger.OnUnavailable // nil: the ledger.Client's decides
	responseHeaders bool
	maxWaiting      int
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

// New returns a service deciding on c, with no configuration until Load.
func New(c *ledger.Client, opts ...Option) (*Service, error) {
	o := options{maxWaiting: 4096}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxWaiting <= 0 {
		return nil, fmt.Errorf("%w: MaxWaiting(%d): must be positive", ledger.ErrInvalidAmount, o.maxWaiting)
	}
	var gopts []recipes.Option
	if o.onUnavailable != nil {
		gopts = append(gopts, recipes.WithUnavailable(*o.onUnavailable))
	}
	g, err := recipes.NewGroup(c, "ratelimit", gopts...)
	if err != nil {
		return nil, err
	}
	s := &Service{c: c, group: g, opts: o, stats: newStats(c), waiting: make(chan struct{}, o.maxWaiting), overrides: map[string]*rule{}}
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

// drain waits until no call is deciding: each holds a place in waiting.
func (s *Service) drain() {
	for range cap(s.waiting) {
		s.waiting <- struct{}{}
	}
	for range cap(s.waiting) {
		<-s.waiting
	}
}

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
	return &rule{Rule: r, res: res, limiter: l, display: display}, nil
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

// override is the rule of a descriptor that carries its own limit (Envoy's
// per-descriptor limit override): a rule of its domain and keys, created
// on first use.
func (s *Service) override(ctx context.Context, domain string, entries []Entry, lim *rlcommon.RateLimitDescriptor_RateLimitOverride) (*rule, error) {
	raw := lim.GetUnit()
	if raw < 1 || raw > 7 {
		return nil, status.Errorf(codes.InvalidArgument, "a descriptor's limit override has unit %v: want SECOND to YEAR", raw)
	}
	u := TimeUnit(raw)
	spec := domain + "\x00override"
	key := domain
	for _, e := range entries {
		spec += "\x00" + e.Key
		key += "." + e.Key
	}
	spec += "\x00" + u.String()
	s.overridesMu.Lock()
	rl := s.overrides[spec]
	s.overridesMu.Unlock()
	if rl != nil {
		return rl, nil
	}
	rl, err := s.newRule(ctx, &Rule{Domain: domain, Key: key, Unit: u, spec: spec, File: "(limit override)"})
	if err != nil {
		return nil, err
	}
	s.overridesMu.Lock()
	defer s.overridesMu.Unlock()
	if prev := s.overrides[spec]; prev != nil {
		return prev, nil
	}
	if len(s.overrides) >= maxOverrides {
		return nil, status.Errorf(codes.InvalidArgument, "more than %d distinct limit overrides (domain, keys, unit): refused", maxOverrides)
	}
	s.overrides[spec] = rl
	return rl, nil
}

// maxOverrides bounds the rules of Envoy's per-descriptor limits a Service
// keeps: each is a resource in the cluster, and callers make them.
const maxOverrides = 10_000

// item is one descriptor of a request on its way to a decision.
type item struct {
	rule   *rule
	limit  uint32 // the rule's, or the descriptor's override
	user   string
	metric string
	hits   uint64 // 0: check only (a descriptor's own hits_addend of 0)
	part   int    // its index in the chain; or partNone, partRefused, partCheck
}

// What becomes of an item that is not in the chain.
const (
	partNone    = -1 // no rule limits it (none met, unlimited, replaced)
	partRefused = -2 // its hits can never fit (a limit of 0, or under the hits): refused without the cluster
	partCheck   = -3 // check only: read, nothing taken
)

// ShouldRateLimit decides req: every descriptor that meets a rule with a
// limit takes its hits from it (the request's hits_addend, 0 meaning 1, or
// the descriptor's own, where 0 checks without taking), as one chain, all
// or none. See the package documentation for the answer's fields.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rls.RateLimitRequest) (resp *rls.RateLimitResponse, err error) {
	start := time.Now()
	defer func() {
		s.stats.latency.WithLabelValues(status.Code(err).String()).Observe(time.Since(start).Seconds())
	}()
	select {
	case s.waiting <- struct{}{}:
		defer func() { <-s.waiting }()
	default:
		return nil, status.Errorf(codes.ResourceExhausted, "%d calls already deciding", cap(s.waiting))
	}
	switch {
	case req.GetDomain() == "":
		return nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	case len(req.GetDescriptors()) == 0:
		return nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	case len(req.GetDescriptors()) > MaxDescriptors:
		return nil, status.Errorf(codes.InvalidArgument, "%d descriptors in one request: at most %d", len(req.GetDescriptors()), MaxDescriptors)
	}
	// Everything the cluster is asked ends before the caller's deadline.
	ctx, cancel := answerBefore(ctx)
	defer cancel()
	resp, err = s.decide(ctx, req)
	if err != nil && s.opts.failsOpen() && errors.Is(err, ledger.ErrUnavailable) {
		return okResponse(len(req.GetDescriptors())), nil
	}
	if err != nil {
		return nil, grpcError(err)
	}
	return resp, nil
}

// decide is ShouldRateLimit's work.
func (s *Service) decide(ctx context.Context, req *rls.RateLimitRequest) (*rls.RateLimitResponse, error) {
	items, err := s.match(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := okResponse(len(items))
	for i, it := range items {
		if it.rule != nil && it.rule.Unlimited {
			resp.Statuses[i].LimitRemaining = math.MaxUint32
		}
	}
	if err := s.check(ctx, items, resp); err != nil {
		return nil, err
	}
	if refusedLocally(items, resp, s.stats) {
		return resp, nil
	}
	members := make([]recipes.Member, 0, len(items))
	for i := range items {
		it := &items[i]
		if it.part < 0 {
			continue
		}
		it.part = len(members)
		members = append(members, recipes.Member{Limiter: it.rule.limiter, Key: it.user, Cost: recipes.Cost{Requests: it.hits},
			Limits: recipes.Plan{it.rule.res.Name: uint64(it.limit)}})
	}
	if len(members) == 0 {
		return resp, nil
	}
	res, err := s.group.Allow(ctx, members)
	if err != nil {
		return nil, err
	}
	s.answer(items, res, resp)
	return resp, nil
}

// failsOpen reports whether the service answers OK while the cluster
// does not answer.
func (o *options) failsOpen() bool {
	return o.onUnavailable != nil && *o.onUnavailable == ledger.FailOpen
}

// okResponse is an answer of OK for n descriptors.
func okResponse(n int) *rls.RateLimitResponse {
	resp := &rls.RateLimitResponse{OverallCode: rls.RateLimitResponse_OK, Statuses: make([]*rls.RateLimitResponse_DescriptorStatus, n)}
	for i := range resp.Statuses {
		resp.Statuses[i] = &rls.RateLimitResponse_DescriptorStatus{Code: rls.RateLimitResponse_OK}
	}
	return resp
}

// answerBefore bounds a decision so that it ends before the caller's
// deadline, by a fifth of the time left (at most 100 ms): a cluster that
// does not answer is then reported (UNAVAILABLE, or OK when failing open)
// while the caller still listens, as Envoy's failure_mode_deny expects.
func answerBefore(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	left := time.Until(dl)
	return context.WithDeadline(ctx, dl.Add(-min(left/5, 100*time.Millisecond)))
}

// match finds the rule of each descriptor of req, drops those other rules
// of the request replace, and sorts the descriptors: to decide in the
// chain (part 0), refused without the cluster, checked only, or not limited.
func (s *Service) match(ctx context.Context, req *rls.RateLimitRequest) ([]item, error) {
	st := s.state.Load()
	items := make([]item, len(req.GetDescriptors()))
	replaced := map[string]bool{}
	for i, d := range req.GetDescriptors() {
		it := &items[i]
		it.part = partNone
		entries := make([]Entry, len(d.GetEntries()))
		values := make([]string, len(entries))
		for j, e := range d.GetEntries() {
			entries[j], values[j] = Entry{Key: e.GetKey(), Value: e.GetValue()}, e.GetValue()
		}
		it.hits = max(uint64(req.GetHitsAddend()), 1)
		if h := d.GetHitsAddend(); h != nil {
			it.hits = h.GetValue() // 0: check only, as Envoy asks at a request's start
		}
		if lim := d.GetLimit(); lim != nil && len(entries) > 0 {
			if !st.cfg.hasDomain(req.GetDomain()) {
				continue // as envoyproxy/ratelimit: an unknown domain limits nothing
			}
			rl, err := s.override(ctx, req.GetDomain(), entries, lim)
			if err != nil {
				return nil, err
			}
			it.rule, it.limit, it.user, it.metric = rl, lim.GetRequestsPerUnit(), UserKey(values), rl.Key
			continue
		}
		m, ok := st.cfg.lookup(req.GetDomain(), entries)
		if !ok {
			continue
		}
		it.user, it.metric = m.user, m.metric
		for _, name := range m.rule.Replaces {
			replaced[name] = true
		}
		if m.rule.Unlimited {
			it.rule = &rule{Rule: m.rule}
			continue
		}
		it.rule, it.limit = st.rules[m.rule], m.rule.RequestsPerUnit
	}
	for i := range items {
		it := &items[i]
		switch {
		case it.rule == nil || it.rule.Unlimited:
		case it.rule.Name != "" && replaced[it.rule.Name]:
			it.rule = nil
		case it.hits == 0:
			it.part = partCheck
		case it.limit == 0 || it.hits > uint64(it.limit):
			it.part = partRefused
		default:
			it.part = 0
		}
	}
	return items, nil
}

// check decides the check-only descriptors, taking nothing: over the limit
// when nothing is left, as envoyproxy/ratelimit answers an increment of 0
// at the limit. They are checked together, in the Client's pipeline (one
// read shared with the checks of other requests in flight, or none when
// the Client knows the keys). One enforcing descriptor over its limit
// refuses the request, and the chain is not sent.
func (s *Service) check(ctx context.Context, items []item, resp *rls.RateLimitResponse) error {
	var idx []int
	var parts []ledger.Part
	for i := range items {
		if it := &items[i]; it.part == partCheck {
			it.part = partNone
			idx = append(idx, i)
			parts = append(parts, ledger.Part{Resource: it.rule.res,
				Request: ledger.Request{User: it.user, Amount: 1, Limit: uint64(it.limit)}})
		}
	}
	if len(parts) == 0 {
		return nil
	}
	ds, err := s.c.CheckAll(ctx, parts)
	if err != nil {
		return err
	}
	for k, i := range idx {
		if it := &items[i]; s.describe(it, ds[k], it.rule.ShadowMode, resp.Statuses[i]) {
			it.part = partRefused // refuses the request: nothing taken elsewhere
		}
	}
	return nil
}

// refusedLocally answers a request that a descriptor refuses without the
// cluster (a limit of 0, more hits than the whole limit, or a check-only
// descriptor at its limit; shadow_mode rules excepted): nothing is asked
// of the cluster, since nothing may be taken; the other descriptors report
// their limit only. A rule in shadow mode that would refuse is counted,
// and left out.
func refusedLocally(items []item, resp *rls.RateLimitResponse, st *stats) bool {
	refused := false
	for i := range items {
		it := &items[i]
		if it.part != partRefused {
			continue
		}
		if resp.Statuses[i].Code == rls.RateLimitResponse_OVER_LIMIT {
			refused = true // a check-only descriptor at its limit: counted already
			continue
		}
		if it.rule.ShadowMode {
			st.count(it, hitsShadow)
			it.part = partNone
			continue
		}
		st.count(it, hitsOver)
		refused = true
		resp.Statuses[i].Code = rls.RateLimitResponse_OVER_LIMIT
		resp.Statuses[i].CurrentLimit = currentLimit(it)
	}
	if !refused {
		return false
	}
	resp.OverallCode = rls.RateLimitResponse_OVER_LIMIT
	for i := range items {
		if items[i].part >= 0 {
			resp.Statuses[i].CurrentLimit = currentLimit(&items[i])
			st.count(&items[i], hitsNotTaken)
		}
	}
	return true
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

// grpcError is the gRPC status of a decision's error: the caller's
// mistakes are INVALID_ARGUMENT, an unanswered cluster UNAVAILABLE (or
// DEADLINE_EXCEEDED when the caller's deadline passed).
func grpcError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, ledger.ErrUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, ledger.ErrTooMany), errors.Is(err, ledger.ErrInvalidKey), errors.Is(err, ledger.ErrInvalidAmount):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
