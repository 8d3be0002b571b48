package metrics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/recipes"
	"github.com/tblimit/tblimit/recipes/metrics"
	"github.com/tblimit/tblimit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// gathered is what a registry gathered: metric families by name.
type gathered map[string]*dto.MetricFamily

func gather(t *testing.T, reg *prometheus.Registry) gathered {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	g := gathered{}
	for _, mf := range mfs {
		g[mf.GetName()] = mf
	}
	return g
}

// value returns the counter (or histogram count) of name with labels.
func (g gathered) value(name string, labels map[string]string) float64 {
	mf := g[name]
	if mf == nil {
		return -1
	}
next:
	for _, m := range mf.Metric {
		for _, lp := range m.Label {
			if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
				continue next
			}
		}
		if h := m.GetHistogram(); h != nil {
			return float64(h.GetSampleCount())
		}
		return m.GetCounter().GetValue()
	}
	return 0
}

// Every outcome is counted by limiter, with latency, the policy that
// denied, and what the Client sent.
func TestCollector(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		sc := simnet.New(b.Client, simnet.Model{Name: "free"})
		t.Cleanup(sc.Close)
		m := metrics.New(nil)
		c := ledger.New(sc, ledger.WithNow(b.Now), ledger.WithTimeout(200*time.Millisecond), ledger.WithObserver(m))
		m.Watch(c)
		// The first call on a real server registers the session: longer
		// than the timeout this test needs for its stalled calls.
		warm, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := c.Ping(warm); err != nil {
			t.Fatal(err)
		}
		cancel()
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(m)
		limiter := func(name string, n uint64, opts ...recipes.Option) *recipes.Limiter {
			l, err := recipes.NewLimiter(c, name, []recipes.Policy{{Name: name, Ledger: b.NewLedger(), Limit: recipes.Per(n, time.Minute), Lazy: true}}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Create(ctx); err != nil {
				t.Fatal(err)
			}
			return l
		}
		s, err := recipes.NewStack("api", []recipes.Layer[string]{
			{Limiter: limiter("enforced", 2), Key: func(k string) string { return k }},
			{Limiter: limiter("trial", 1, recipes.Shadow()), Key: func(k string) string { return k }},
		}, recipes.WithObserver(m))
		if err != nil {
			t.Fatal(err)
		}
		for range 3 { // admitted, shadow-denied, denied
			if _, err := s.Allow(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Allow(ctx, ""); !errors.Is(err, ledger.ErrInvalidKey) {
			t.Fatalf("empty key: %v", err)
		}
		sc.SetFaults(simnet.Faults{Stall: true})
		if _, err := s.Allow(ctx, "fresh"); !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("stalled: %v", err)
		}
		sc.SetFaults(simnet.Faults{})

		// The stalled call's batch goes on after its caller gave up (its
		// create follows its accounts): gather when the counts stand still.
		var g gathered
		var st ledger.Stats
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			st = c.Stats()
			if g = gather(t, reg); c.Stats() == st || time.Now().After(deadline) {
				break
			}
		}
		for outcome, want := range map[string]float64{"admitted": 1, "shadow-denied": 1, "denied": 1, "error": 1, "unavailable": 1} {
			if got := g.value("tblimit_decisions_total", map[string]string{"limiter": "api", "outcome": outcome}); got != want {
				t.Errorf("decisions %s = %v, want %v", outcome, got, want)
			}
		}
		if got := g.value("tblimit_decision_duration_seconds", map[string]string{"limiter": "api"}); got != 5 {
			t.Errorf("latency samples = %v, want 5", got)
		}
		for _, c := range []struct {
			policy, mode string
			want         float64
		}{{"enforced", "enforced", 1}, {"trial", "shadow", 2}} {
			if got := g.value("tblimit_policy_denials_total", map[string]string{"policy": c.policy, "mode": c.mode}); got != c.want {
				t.Errorf("denials of %s (%s) = %v, want %v", c.policy, c.mode, got, c.want)
			}
		}
		if got := g.value("tblimit_resource_decisions_total", map[string]string{"resource": "enforced", "outcome": "admitted"}); got < 2 {
			t.Errorf("ledger-level admissions of enforced = %v, want at least 2", got)
		}
		if got := g.value("tblimit_tigerbeetle_requests_total", map[string]string{"operation": "create_transfers"}); got != float64(st.CreateTransfers.Requests) || got == 0 {
			t.Errorf("create_transfers requests = %v, want %d", got, st.CreateTransfers.Requests)
		}
		if got := g.value("tblimit_tigerbeetle_events_total", map[string]string{"operation": "create_transfers"}); got != float64(st.CreateTransfers.Events) {
			t.Errorf("create_transfers events = %v, want %d", got, st.CreateTransfers.Events)
		}
		if got := g.value("tblimit_local_denials_total", nil); got != float64(st.LocalDenials) {
			t.Errorf("local denials = %v, want %d", got, st.LocalDenials)
		}
	})
}
