package ratelimit

import (
	"time"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/recipes/metrics"
	"github.com/tblimit/tblimit/service"
)

// nearLimitRatio: an admitted hit that leaves less than this share of the
// limit is counted near the limit, as envoyproxy/ratelimit counts it.
const nearLimitRatio = 0.2

// stats are a service's counters, by domain and descriptor (the rule's
// key, or with detailed_metric and value_to_metric the request's values),
// as envoyproxy/ratelimit keeps them; counted in hits.
type stats struct {
	total, within, near, over, shadow *prometheus.CounterVec
	loads                             *prometheus.CounterVec
	// latency is how long calls took to answer, by gRPC code (OK, or the
	// error's); calls counts them by answer, which splits latency's OK into
	// the overall codes OK and OVER_LIMIT; cluster is what the service's
	// ledger.Client sent to TigerBeetle (tblimit_tigerbeetle_*,
	// tblimit_local_denials_total, ...), so that requests per decision can
	// be read off both.
	latency *prometheus.HistogramVec
	calls   *prometheus.CounterVec
	cluster *metrics.Collector
	// waiting and maxWaiting read the calls holding a place of the
	// Service's bound, and its size (shared with tblimit.v1 when served
	// beside it).
	waiting, maxWaiting prometheus.Collector
}

// newStats returns the counters of a Service deciding on c whose calls
// hold a place of the bound waiting while they decide.
func newStats(c *ledger.Client, waiting *service.Bound) *stats {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tblimit_ratelimit_" + name, Help: help}, []string{"domain", "descriptor"})
	}
	return &stats{
		total:  vec("total_hits_total", "Hits asked of a rule (each descriptor's hits_addend, 0 meaning 1)."),
		within: vec("within_limit_total", "Hits admitted with more than a fifth of the limit left."),
		near:   vec("near_limit_total", "Hits admitted that left less than a fifth of the limit."),
		over:   vec("over_limit_total", "Hits refused: the rule had fewer left than asked."),
		shadow: vec("shadow_mode_total", "Hits a rule in shadow_mode would have refused, answered OK (counted in over_limit_total too)."),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tblimit_ratelimit_config_loads_total",
			Help: "Configuration loads, by result (success, error): a refused one leaves the last good configuration in force."}, []string{"result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tblimit_ratelimit_call_duration_seconds",
			Help:    "How long ShouldRateLimit calls took to answer, by gRPC code.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"code"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tblimit_ratelimit_calls_total",
			Help: "ShouldRateLimit calls, by answer: the overall code (OK, OVER_LIMIT) of those answered, else the gRPC code they failed with, as tblimit_ratelimit_call_duration_seconds has it (Unavailable, ResourceExhausted, ...)."},
			[]string{"code"}),
		cluster: metrics.New(c),
		waiting: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tblimit_ratelimit_calls_waiting",
			Help: "Calls deciding now; past tblimit_ratelimit_max_waiting, more fail at once with RESOURCE_EXHAUSTED."},
			func() float64 { return float64(waiting.Len()) }),
		maxWaiting: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tblimit_ratelimit_max_waiting",
			Help: "The most calls deciding at once (MaxWaiting, tblimit serve --max-waiting)."},
			func() float64 { return float64(waiting.Cap()) }),
	}
}

// called counts a ShouldRateLimit call that began at start and ended with
// resp or err.
func (s *stats) called(start time.Time, resp *rls.RateLimitResponse, err error) {
	code := status.Code(err).String()
	s.latency.WithLabelValues(code).Observe(time.Since(start).Seconds())
	if err == nil {
		code = resp.GetOverallCode().String()
	}
	s.calls.WithLabelValues(code).Inc()
}

// count adds the hits of it, settled, to the counters of what its rule
// made of it.
func (s *stats) count(it *item) {
	labels := []string{it.rule.Domain, it.metric}
	hits := float64(it.hits)
	s.total.WithLabelValues(labels...).Add(hits)
	d := it.d
	switch refused := d.Reason == ledger.LimitExceeded; {
	case refused && it.rule.ShadowMode: // counted over the limit too, as envoyproxy/ratelimit counts it
		s.shadow.WithLabelValues(labels...).Add(hits)
		s.over.WithLabelValues(labels...).Add(hits)
	case refused:
		s.over.WithLabelValues(labels...).Add(hits)
	case !d.Allowed: // it fitted, but another descriptor of the request refused it
	case float64(d.Remaining) < nearLimitRatio*float64(d.Limit):
		s.near.WithLabelValues(labels...).Add(hits)
	default:
		s.within.WithLabelValues(labels...).Add(hits)
	}
}

func (s *stats) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.total, s.within, s.near, s.over, s.shadow, s.loads, s.latency, s.calls, s.cluster,
		s.waiting, s.maxWaiting}
}

// Describe implements prometheus.Collector: the service's counters per
// domain and descriptor, its calls by answer, their latency and those
// deciding now (tblimit_ratelimit_*), and
// what its ledger.Client sent to TigerBeetle (tblimit_tigerbeetle_*, see
// package recipes/metrics).
func (s *Service) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range s.stats.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (s *Service) Collect(ch chan<- prometheus.Metric) {
	for _, c := range s.stats.collectors() {
		c.Collect(ch)
	}
}

// CountLoadError counts a configuration that was refused before it reached
// Load (it did not parse), as Load counts those it refuses.
func (s *Service) CountLoadError() { s.stats.loads.WithLabelValues("error").Inc() }
