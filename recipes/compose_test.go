package recipes_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/recipes"
	"github.com/tblimit/tblimit/testenv"
)

// windows returns a short and a long window: a second and a minute on the
// embedded engine, whose clock the test moves; 2 s and 10 s on a real
// server, where the test waits.
func windows(b *testenv.Backend) (short, long time.Duration) {
	if b.Real {
		return 2 * time.Second, 10 * time.Second
	}
	return time.Second, time.Minute
}

// newLimiter builds and creates a limiter of policies on fresh ledgers.
func newLimiter(t *testing.T, b *testenv.Backend, c *ledger.Client, name string, policies []recipes.Policy, opts ...recipes.Option) *recipes.Limiter {
	t.Helper()
	for i := range policies {
		policies[i].Ledger = b.NewLedger()
	}
	l, err := recipes.NewLimiter(c, name, policies, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l
}

// step is one decision of a table and what it must give.
type step struct {
	cost      recipes.Cost
	allowed   bool
	deniedBy  string
	remaining []uint64 // per policy; nil: not checked
}

func checkStep(t *testing.T, i int, s step, r recipes.Result, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("step %d: AllowCost(%+v) error %v", i, s.cost, err)
	}
	if r.Allowed != s.allowed || r.DeniedBy != s.deniedBy {
		t.Fatalf("step %d: AllowCost(%+v) = allowed %v denied by %q, want %v, %q (%+v)", i, s.cost, r.Allowed, r.DeniedBy, s.allowed, s.deniedBy, r)
	}
	for j, want := range s.remaining {
		if p := r.Policies()[j]; !p.Skipped() && p.Decision.Remaining != want {
			t.Fatalf("step %d: policy %s: Remaining = %d, want %d (%+v)", i, p.Policy, p.Decision.Remaining, want, r.Policies())
		}
	}
	if !r.Allowed && (r.RetryAfter == 0 || r.Reason != ledger.LimitExceeded) {
		t.Fatalf("step %d: denied with RetryAfter %v, Reason %v", i, r.RetryAfter, r.Reason)
	}
}

// peekInFlight returns what l's key holds on each policy.
func peekInFlight(t *testing.T, l interface {
	Peek(context.Context, string) ([]recipes.PolicyUsage, error)
}, key string) []uint64 {
	t.Helper()
	us, err := l.Peek(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, u := range us {
		out = append(out, u.InFlight)
	}
	return out
}

// Several limits per key, decided as one chain: every policy reports its
// remaining units, the denying one is named with its retry-after, and a
// denial takes nothing from any policy.
func TestLimiterSeveralLimits(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		short, long := windows(b)
		c := ledger.New(b.Client)
		l := newLimiter(t, b, c, "api", []recipes.Policy{
			{Name: "per-second", Limit: recipes.Per(2, short), Lazy: true},
			{Name: "per-minute", Limit: recipes.Per(5, long), Lazy: true},
			{Name: "bytes", Limit: recipes.Bytes(1000).Per(long), Unit: recipes.ContentBytes, Lazy: true},
		})
		steps := []step{
			{cost: recipes.Cost{Requests: 1, Bytes: 100}, allowed: true, remaining: []uint64{1, 4, 900}},
			{cost: recipes.Cost{Requests: 1, Bytes: 100}, allowed: true, remaining: []uint64{0, 3, 800}},
			{cost: recipes.Cost{Requests: 1, Bytes: 100}, deniedBy: "per-second", remaining: []uint64{0, 3, 800}},
		}
		for i, s := range steps {
			r, err := l.AllowCost(ctx, "alice", s.cost)
			checkStep(t, i, s, r, err)
			if i == 2 {
				if r.RetryAfter > short || r.Policies()[1].Decision.Reason != ledger.Admitted {
					t.Fatalf("denied: RetryAfter %v (want at most %v), per-minute %v (want admitted: it would have fitted)", r.RetryAfter, short, r.Policies()[1].Decision.Reason)
				}
			}
		}
		if got := peekInFlight(t, l, "alice"); !slices.Equal(got, []uint64{2, 2, 200}) {
			t.Fatalf("after a denial: in flight %v, want [2 2 200]: a denial takes nothing", got)
		}
		b.Advance(t, short+time.Millisecond)
		waitPeek(t, b, l, "alice", []uint64{0, 2, 200})
		steps = []step{
			{cost: recipes.Cost{Requests: 1, Bytes: 900}, deniedBy: "bytes"},
			{cost: recipes.Cost{Requests: 1, Bytes: 800}, allowed: true, remaining: []uint64{1, 2, 0}},
			{cost: recipes.Cost{Requests: 1}, allowed: true, remaining: []uint64{0, 1}}, // no bytes: the bytes policy is not decided
		}
		for i, s := range steps {
			r, err := l.AllowCost(ctx, "alice", s.cost)
			checkStep(t, i+3, s, r, err)
			if s.cost.Bytes == 0 && (!r.Policies()[2].Skipped() || r.Policies()[2].Decision.Limit != 1000) {
				t.Fatalf("no bytes: bytes policy %+v, want skipped with its limit", r.Policies()[2])
			}
		}
		r, err := l.AllowCost(ctx, "alice", recipes.Cost{Requests: 1, Bytes: 1001})
		if err != nil || r.Allowed || r.RetryAfter >= 0 {
			t.Fatalf("more bytes than the limit: %+v, %v; want denied, never (RetryAfter < 0)", r, err)
		}
		if _, err := l.Allow(ctx, ""); !errors.Is(err, ledger.ErrInvalidKey) {
			t.Fatalf("Allow with an empty key: %v, want ErrInvalidKey", err)
		}
		if _, err := l.AllowCost(ctx, "alice", recipes.Cost{}); !errors.Is(err, ledger.ErrInvalidAmount) {
			t.Fatalf("AllowCost of nothing: %v, want ErrInvalidAmount", err)
		}
	})
}

// waitPeek waits (on a real server, which frees expired units a little
// late) until key holds want on l's policies.
func waitPeek(t *testing.T, b *testenv.Backend, l *recipes.Limiter, key string, want []uint64) {
	t.Helper()
	for i := 0; ; i++ {
		got := peekInFlight(t, l, key)
		if slices.Equal(got, want) {
			return
		}
		if !b.Real || i == 50 {
			t.Fatalf("Peek(%s): in flight %v, want %v", key, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// call is a request as a payment API sees it.
type call struct{ customer, route string }

// A stack of a global limit, a limit per customer and one per customer and
// route is one decision: all or nothing, one create request.
func TestStackAllOrNothing(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		_, w := windows(b)
		c := ledger.New(b.Client)
		global := newLimiter(t, b, c, "global", []recipes.Policy{{Name: "global", Limit: recipes.Per(100, w), Lazy: true}})
		customer := newLimiter(t, b, c, "customer", []recipes.Policy{{Name: "customer", Limit: recipes.Per(3, w), Lazy: true}})
		route := newLimiter(t, b, c, "route", []recipes.Policy{{Name: "route", Limit: recipes.Per(2, w), Lazy: true}})
		s, err := recipes.NewStack("payments", []recipes.Layer[call]{
			{Limiter: global, Key: func(call) string { return "all" }},
			{Limiter: customer, Key: func(r call) string { return r.customer }},
			{Limiter: route, Key: func(r call) string { return r.customer + "|" + r.route }},
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, s2 := range []struct {
			in       call
			deniedBy string
		}{
			{call{"acme", "pay"}, ""},
			{call{"acme", "pay"}, ""},
			{call{"acme", "pay"}, "route"},
			{call{"acme", "refund"}, ""},
			{call{"acme", "refund"}, "customer"},
			{call{"beta", "pay"}, ""},
		} {
			before := c.Stats().CreateTransfers
			r, err := s.Allow(ctx, s2.in)
			if err != nil || r.Allowed != (s2.deniedBy == "") || r.DeniedBy != s2.deniedBy {
				t.Fatalf("decision %d (%v) = %+v, %v; want denied by %q", i, s2.in, r, err, s2.deniedBy)
			}
			if len(r.Policies()) != 3 {
				t.Fatalf("decision %d: %d policies, want 3", i, len(r.Policies()))
			}
			if d := c.Stats().CreateTransfers.Requests - before.Requests; i == 1 && d != 1 { // every key seen before: one chain
				t.Fatalf("decision %d: %d create requests, want one chain", i, d)
			}
		}
		us, err := s.Peek(ctx, call{"acme", "pay"})
		if err != nil {
			t.Fatal(err)
		}
		if us[0].InFlight != 4 || us[1].InFlight != 3 || us[2].InFlight != 2 {
			t.Fatalf("in flight %+v: want global 4, acme 3, acme|pay 2 (denials took nothing)", us)
		}
	})
}

// Plans: a lazy key gets its plan's limit, a plan change takes effect with
// the next decision, and an override beats the plan.
func TestPlans(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		_, w := windows(b)
		var mu sync.Mutex
		tiers := map[string]string{"frank": "free", "paula": "pro"}
		plans := recipes.NewPlans(func(_ context.Context, key string) string {
			mu.Lock()
			defer mu.Unlock()
			return tiers[key]
		}, map[string]recipes.Plan{"free": {"calls": 2}, "pro": {"calls": 5}})
		c := ledger.New(b.Client)
		l := newLimiter(t, b, c, "api", []recipes.Policy{{Name: "calls", Limit: recipes.Per(1, w), Lazy: true}}, recipes.WithPlans(plans))
		allow := func(key string, n int, want bool) {
			t.Helper()
			for i := range n {
				r, err := l.Allow(ctx, key)
				if err != nil || r.Allowed != want {
					t.Fatalf("Allow(%s) #%d = %+v, %v; want allowed %v", key, i+1, r, err, want)
				}
			}
		}
		us, err := l.Peek(ctx, "frank")
		if err != nil || us[0].Limit != 2 || us[0].Available != 2 {
			t.Fatalf("Peek of a key never seen = %+v, %v; want its plan's 2", us, err)
		}
		allow("frank", 2, true)
		allow("frank", 1, false)
		allow("paula", 5, true)
		allow("paula", 1, false)
		allow("nobody", 1, true) // no plan: the default, 1
		allow("nobody", 1, false)

		// frank gets an override of 4: his next decision has it.
		if err := plans.Override("frank", recipes.Plan{"calls": 4}); err != nil {
			t.Fatal(err)
		}
		allow("frank", 2, true)
		allow("frank", 1, false)
		// paula moves down to free: at most max(5, 2) in any window, and 2
		// once her window has passed.
		mu.Lock()
		tiers["paula"] = "free"
		mu.Unlock()
		allow("paula", 1, false)
		if u, err := l.Peek(ctx, "paula"); err != nil || u[0].Limit != 2 {
			t.Fatalf("paula after the change: %+v, %v; want limit 2", u, err)
		}
		b.Advance(t, w+time.Millisecond)
		waitPeek(t, b, l, "paula", []uint64{0})
		allow("paula", 2, true)
		allow("paula", 1, false)
		a, err := c.Audit(ctx, l.Resources()[0], "paula", time.Time{}, time.Time{})
		if err != nil || a.MostInWindow > 5 || a.Units != 7 {
			t.Fatalf("Audit(paula) = %+v, %v; want 7 units, at most 5 in a window", a, err)
		}
		plans.RemoveOverride("frank")
		if u, _ := l.Peek(ctx, "frank"); u[0].Limit != 4 {
			t.Fatalf("frank: limit %d before his next decision, want 4 still", u[0].Limit)
		}
		if r, err := l.Allow(ctx, "frank"); err != nil || !r.Allowed || r.Policies()[0].Decision.Limit != 2 {
			t.Fatalf("frank's next decision = %+v, %v; want allowed under his plan's 2", r, err)
		}
	})
}

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []recipes.Event
}

func (r *recorder) ObserveResult(e recipes.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) outcomes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.Outcome().String())
	}
	return out
}

// Shadow mode, per limiter and for a whole stack: never denies, records as
// usual, and reports the would-be denials.
func TestShadow(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		_, w := windows(b)
		c := ledger.New(b.Client)
		enforced := newLimiter(t, b, c, "enforced", []recipes.Policy{{Name: "enforced", Limit: recipes.Per(3, w), Lazy: true}})
		trial := newLimiter(t, b, c, "trial", []recipes.Policy{{Name: "trial", Limit: recipes.Per(1, w), Lazy: true}}, recipes.Shadow())
		var rec recorder
		s, err := recipes.NewStack("api", []recipes.Layer[string]{
			{Limiter: enforced, Key: func(k string) string { return k }},
			{Limiter: trial, Key: func(k string) string { return k }},
		}, recipes.WithObserver(&rec))
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []struct {
			allowed bool
			shadow  []string
		}{{true, nil}, {true, []string{"trial"}}, {true, []string{"trial"}}, {false, []string{"trial"}}} {
			r, err := s.Allow(ctx, "k")
			if err != nil || r.Allowed != want.allowed || !slices.Equal(r.ShadowDenied, want.shadow) {
				t.Fatalf("decision %d = %+v, %v; want allowed %v, shadow-denied %v", i+1, r, err, want.allowed, want.shadow)
			}
		}
		if got := rec.outcomes(); !slices.Equal(got, []string{"admitted", "shadow-denied", "shadow-denied", "denied"}) {
			t.Fatalf("outcomes %v", got)
		}
		if in := peekInFlight(t, enforced, "k"); in[0] != 3 {
			t.Fatalf("enforced holds %d, want 3: a shadow denial does not stop the others", in[0])
		}
		if in := peekInFlight(t, trial, "k"); in[0] != 1 {
			t.Fatalf("trial holds %d, want 1: it takes when it fits", in[0])
		}

		// A whole stack in shadow mode, and a limiter in shadow mode alone.
		strict := newLimiter(t, b, c, "strict", []recipes.Policy{{Name: "strict", Limit: recipes.Per(1, w), Lazy: true}})
		all, err := recipes.NewStack("shadow", []recipes.Layer[string]{{Limiter: strict, Key: func(k string) string { return k }}}, recipes.Shadow())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			r, err := all.Allow(ctx, "k")
			if err != nil || !r.Allowed || (i > 0) != (len(r.ShadowDenied) == 1) {
				t.Fatalf("shadow stack, decision %d = %+v, %v", i+1, r, err)
			}
		}
		r, err := trial.Allow(ctx, "k")
		if err != nil || !r.Allowed || !slices.Equal(r.ShadowDenied, []string{"trial"}) || r.Policies()[0].Decision.Allowed {
			t.Fatalf("shadow limiter = %+v, %v; want allowed, shadow-denied, nothing taken", r, err)
		}
	})
}

// Peek takes nothing; Reset voids a key's holds on every policy, and the
// audit trail shows the voids.
func TestPeekAndReset(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		short, long := windows(b)
		c := ledger.New(b.Client)
		l := newLimiter(t, b, c, "api", []recipes.Policy{
			{Name: "fast", Limit: recipes.Per(3, short), Lazy: true},
			{Name: "slow", Limit: recipes.Per(10, long), Lazy: true},
		})
		for range 3 {
			if r, err := l.Allow(ctx, "k"); err != nil || !r.Allowed {
				t.Fatalf("Allow = %+v, %v", r, err)
			}
		}
		for range 2 { // Peek twice: it takes nothing
			us, err := l.Peek(ctx, "k")
			if err != nil || us[0].InFlight != 3 || us[0].Available != 0 || us[1].Available != 7 || us[0].ResetAfter <= 0 {
				t.Fatalf("Peek = %+v, %v", us, err)
			}
		}
		n, err := l.Reset(ctx, "k")
		if err != nil || n != 6 {
			t.Fatalf("Reset = %d, %v; want 6 holds ended", n, err)
		}
		if got := peekInFlight(t, l, "k"); !slices.Equal(got, []uint64{0, 0}) {
			t.Fatalf("after Reset: in flight %v", got)
		}
		a, err := c.Audit(ctx, l.Resources()[1], "k", time.Time{}, time.Time{})
		if err != nil || a.Holds != 3 || a.Ended != 3 {
			t.Fatalf("Audit = %+v, %v; want 3 holds, 3 ended by the reset", a, err)
		}
		if r, err := l.Allow(ctx, "k"); err != nil || !r.Allowed {
			t.Fatalf("Allow after Reset = %+v, %v", r, err)
		}
		if n, err := l.Reset(ctx, "never-seen"); err != nil || n != 0 {
			t.Fatalf("Reset of a key never seen = %d, %v", n, err)
		}
	})
}

// Wait sleeps until RetryAfter and tries again; it returns at once when
// the context's deadline comes first, or the cost can never fit.
func TestWait(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		short, _ := windows(b)
		c := ledger.New(b.Client, ledger.WithNow(b.Now))
		l := newLimiter(t, b, c, "api", []recipes.Policy{{Name: "fast", Limit: recipes.Per(2, short), Lazy: true}})
		var slept []time.Duration
		recipes.SetSleep(l, func(ctx context.Context, d time.Duration) error {
			slept = append(slept, d)
			b.Advance(t, d)
			return nil
		})
		for range 2 {
			if r, err := l.Wait(ctx, "k"); err != nil || !r.Allowed {
				t.Fatalf("Wait with units left = %+v, %v", r, err)
			}
		}
		if len(slept) != 0 {
			t.Fatalf("Wait slept %v with units left", slept)
		}
		start := time.Now()
		dctx, cancel := context.WithTimeout(ctx, short/4)
		_, err := l.Wait(dctx, "k")
		cancel()
		if !errors.Is(err, recipes.ErrWouldExceedDeadline) || time.Since(start) > short/4 || len(slept) != 0 {
			t.Fatalf("Wait with a deadline before the next admission: %v after %v, slept %v; want ErrWouldExceedDeadline at once", err, time.Since(start), slept)
		}
		r, err := l.Wait(ctx, "k")
		if err != nil || !r.Allowed || len(slept) == 0 {
			t.Fatalf("Wait = %+v, %v (slept %v)", r, err, slept)
		}
		var total time.Duration
		for _, d := range slept {
			total += d
		}
		if total < short/2 || total > 2*short {
			t.Fatalf("Wait slept %v in all (%v), want about the window %v", total, slept, short)
		}
		if _, err := l.WaitN(ctx, "k", 3); !errors.Is(err, recipes.ErrExceedsLimit) {
			t.Fatalf("WaitN(3) of a limit of 2: %v, want ErrExceedsLimit", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		recipes.SetSleep(l, func(ctx context.Context, d time.Duration) error { cancel(); <-ctx.Done(); return ctx.Err() })
		l.Allow(ctx, "k")
		if _, err := l.Wait(cctx, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait cancelled while it sleeps: %v, want context.Canceled", err)
		}
	})
}

// A policy whose limit is Bytes counts bytes, whatever its Unit says, and
// one whose limit is an Amount is refused: money is MoneyPerWindow's.
func TestPolicyCountsWhatItsLimitSays(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c := ledger.New(b.Client, ledger.WithNow(b.Now))
		l := newLimiter(t, b, c, "upload", []recipes.Policy{{Name: "upload", Limit: recipes.Bytes(1000).Per(time.Minute), Lazy: true}})
		if p := l.Policies()[0]; p.Unit != recipes.ContentBytes {
			t.Errorf("a Bytes limit's policy counts %v, want content-bytes", p.Unit)
		}
		r, err := l.AllowCost(context.Background(), "k", recipes.Cost{Requests: 1, Bytes: 900})
		if err != nil || !r.Allowed || r.Policies()[0].Decision.Remaining != 100 {
			t.Errorf("AllowCost(1 request, 900 bytes) = %+v, %v; want allowed with 100 bytes left", r, err)
		}
	})
	c := ledger.New(nil)
	if _, err := recipes.NewLimiter(c, "x", []recipes.Policy{{Name: "m", Ledger: 1, Limit: recipes.Amount(100).Per(time.Hour)}}); !errors.Is(err, ledger.ErrInvalidResource) {
		t.Errorf("NewLimiter with an Amount limit = %v, want ErrInvalidResource", err)
	}
}

func TestLimiterValidation(t *testing.T) {
	c := ledger.New(nil)
	ok := recipes.Policy{Name: "a", Ledger: 1, Limit: recipes.PerSecond(1)}
	for _, tc := range []struct {
		name     string
		policies []recipes.Policy
		opts     []recipes.Option
	}{
		{"no policy", nil, nil},
		{"bad window", []recipes.Policy{{Name: "a", Ledger: 1, Limit: recipes.Per(1, time.Millisecond)}}, nil},
		{"no ledger", []recipes.Policy{{Name: "a", Limit: recipes.PerSecond(1)}}, nil},
		{"same ledger", []recipes.Policy{ok, {Name: "b", Ledger: 1, Limit: recipes.PerSecond(1)}}, nil},
		{"same name", []recipes.Policy{ok, {Name: "a", Ledger: 2, Limit: recipes.PerSecond(1)}}, nil},
		{"concurrency unit", []recipes.Policy{{Name: "a", Ledger: 1, Limit: recipes.PerSecond(1), Unit: recipes.ConcurrentRequests}}, nil},
		{"plan of another policy", []recipes.Policy{ok}, []recipes.Option{recipes.WithPlans(recipes.NewPlans(nil, map[string]recipes.Plan{"pro": {"b": 3}}))}},
	} {
		if _, err := recipes.NewLimiter(c, "x", tc.policies, tc.opts...); err == nil {
			t.Errorf("NewLimiter(%s): no error", tc.name)
		}
	}
	// An override naming a policy the limiter lacks: refused once the plans
	// know the limiter, and refused by NewLimiter when made before.
	plans := recipes.NewPlans(nil, nil)
	if err := plans.Override("k", recipes.Plan{"nope": 3}); err != nil {
		t.Fatalf("Override before any limiter = %v, want nil (its policies are not known yet)", err)
	}
	if _, err := recipes.NewLimiter(c, "x", []recipes.Policy{ok}, recipes.WithPlans(plans)); !errors.Is(err, ledger.ErrInvalidResource) {
		t.Errorf("NewLimiter with an override of policy nope: error %v, want ErrInvalidResource", err)
	}
	plans.RemoveOverride("k")
	if _, err := recipes.NewLimiter(c, "x", []recipes.Policy{ok}, recipes.WithPlans(plans)); err != nil {
		t.Fatal(err)
	}
	if err := plans.Override("k", recipes.Plan{"nope": 3}); !errors.Is(err, ledger.ErrInvalidResource) {
		t.Errorf("Override(k, {nope: 3}) = %v, want ErrInvalidResource", err)
	}
	if err := plans.Override("k", recipes.Plan{"a": 3}); err != nil {
		t.Errorf("Override(k, {a: 3}) = %v", err)
	}
	a, _ := recipes.NewLimiter(c, "a", []recipes.Policy{ok})
	other, _ := recipes.NewLimiter(ledger.New(nil), "b", []recipes.Policy{{Name: "b", Ledger: 2, Limit: recipes.PerSecond(1)}})
	key := func(s string) string { return s }
	for name, layers := range map[string][]recipes.Layer[string]{
		"none":          nil,
		"no key":        {{Limiter: a}},
		"other client":  {{Limiter: a, Key: key}, {Limiter: other, Key: key}},
		"same policies": {{Limiter: a, Key: key}, {Limiter: a, Key: key}},
	} {
		if _, err := recipes.NewStack("s", layers); !errors.Is(err, ledger.ErrInvalidResource) {
			t.Errorf("NewStack(%s): error %v, want ErrInvalidResource", name, err)
		}
	}
	if _, err := recipes.NewStack("s", []recipes.Layer[string]{{Limiter: a, Key: key}}, recipes.WithPlans(recipes.NewPlans(nil, nil))); err == nil {
		t.Error("NewStack with plans: no error")
	}
	for u, want := range map[recipes.Unit]string{recipes.Requests: "requests", recipes.ContentBytes: "content-bytes", recipes.ConcurrentRequests: "concurrent-requests"} {
		if u.String() != want {
			t.Errorf("Unit %d: %q, want %q", u, u, want)
		}
	}
}

// The property of a stack: under many goroutines and random costs, no
// window of any policy holds more than its limit, as the cluster recorded
// it (Audit), and a denied decision took nothing from any ledger: every
// hold the cluster recorded belongs to an admitted decision.
func TestStackProperty(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		short, long := windows(b)
		c := ledger.New(b.Client, ledger.WithNow(b.Now))
		limiters := []*recipes.Limiter{
			newLimiter(t, b, c, "global", []recipes.Policy{{Name: "global", Limit: recipes.Per(400, long), Lazy: true}}),
			newLimiter(t, b, c, "customer", []recipes.Policy{
				{Name: "cust-fast", Limit: recipes.Per(6, short), Lazy: true},
				{Name: "cust-slow", Limit: recipes.Per(100, long), Lazy: true},
				{Name: "cust-bytes", Limit: recipes.Bytes(50000).Per(long), Unit: recipes.ContentBytes, Lazy: true},
			}),
			newLimiter(t, b, c, "route", []recipes.Policy{{Name: "route", Limit: recipes.Per(4, short), Lazy: true}}),
		}
		s, err := recipes.NewStack("payments", []recipes.Layer[call]{
			{Limiter: limiters[0], Key: func(call) string { return "all" }},
			{Limiter: limiters[1], Key: func(r call) string { return r.customer }},
			{Limiter: limiters[2], Key: func(r call) string { return r.customer + "|" + r.route }},
		})
		if err != nil {
			t.Fatal(err)
		}
		type account struct{ policy, key string }
		type taken struct {
			holds int
			units uint64
		}
		var mu sync.Mutex
		got := map[account]taken{}
		decisions, admitted := 0, 0
		decide := func(rng *rand.Rand) {
			in := call{[]string{"a", "b", "c"}[rng.IntN(3)], []string{"x", "y"}[rng.IntN(2)]}
			cost := recipes.Cost{Requests: 1 + rng.Uint64N(3), Bytes: rng.Uint64N(1500)}
			r, err := s.AllowCost(ctx, in, cost)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			decisions++
			if !r.Allowed {
				return
			}
			admitted++
			for _, p := range r.Policies() {
				if !p.Skipped() {
					a := account{p.Policy, p.Key}
					got[a] = taken{got[a].holds + 1, got[a].units + p.Amount}
				}
			}
		}
		const goroutines = 16
		if b.Real {
			end := time.Now().Add(2 * short)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					for time.Now().Before(end) {
						decide(rng)
						time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
					}
				})
			}
			wg.Wait()
		} else {
			clockRNG := rand.New(rand.NewPCG(7, 7))
			for round := range 60 {
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(g), uint64(round)))
						for range 3 {
							decide(rng)
						}
					})
				}
				wg.Wait()
				b.Advance(t, time.Duration(clockRNG.IntN(1500))*time.Millisecond)
			}
		}
		resources := map[string]ledger.Resource{}
		for _, l := range limiters {
			for _, r := range l.Resources() {
				resources[r.Name] = r
			}
		}
		checked := 0
		for a, want := range got {
			au, err := c.Audit(ctx, resources[a.policy], a.key, time.Time{}, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if !au.OK() || au.Holds != want.holds || au.Units != want.units {
				t.Errorf("%s of %q: audit %+v; admitted decisions took %d holds, %d units", a.policy, a.key, au, want.holds, want.units)
			}
			checked++
		}
		if admitted == 0 || admitted == decisions || checked < 10 {
			t.Fatalf("%d decisions, %d admitted, %d accounts checked: the test did not exercise the limits", decisions, admitted, checked)
		}
		t.Logf("%d decisions, %d admitted, %d accounts audited", decisions, admitted, checked)
	})
}

// WithUnavailable decides what a Limiter's decisions return while the
// cluster does not answer, whatever the Client's own OnUnavailable; without
// it, the Client's decides.
func TestWithUnavailable(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		_, w := windows(b)
		for _, c := range []struct {
			client  ledger.OnUnavailable
			opts    []recipes.Option
			allowed bool
			err     bool
		}{
			{ledger.ReturnError, nil, false, true},
			{ledger.ReturnError, []recipes.Option{recipes.WithUnavailable(ledger.FailOpen)}, true, false},
			{ledger.ReturnError, []recipes.Option{recipes.WithUnavailable(ledger.FailClosed)}, false, false},
			{ledger.FailOpen, nil, true, false},
			{ledger.FailOpen, []recipes.Option{recipes.WithUnavailable(ledger.ReturnError)}, false, true},
			{ledger.FailOpen, []recipes.Option{recipes.WithUnavailable(ledger.FailClosed)}, false, false},
			{ledger.FailClosed, []recipes.Option{recipes.WithUnavailable(ledger.FailOpen)}, true, false},
		} {
			sc, cl := stallable(t, b, ledger.WithUnavailable(c.client), ledger.WithTimeout(5*time.Second))
			l := newLimiter(t, b, cl, "api", []recipes.Policy{{Name: "api", Limit: recipes.Per(5, w), Lazy: true}}, c.opts...)
			sc.SetFaults(simnet.Faults{Stall: true})
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			r, err := l.Allow(ctx, "k")
			cancel()
			sc.SetFaults(simnet.Faults{})
			if r.Allowed != c.allowed || r.Reason != ledger.Unavailable || (err != nil) != c.err || err != nil && !errors.Is(err, ledger.ErrUnavailable) {
				t.Errorf("client %v, options %d: Allow of a stalled cluster = %+v, %v; want allowed %v, Unavailable, error %v",
					c.client, len(c.opts), r, err, c.allowed, c.err)
			}
		}
	})
}
