package api

import (
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
)

// stats count the API's calls and time them, by method and gRPC code, as
// tblimit_ratelimit_calls_total and tblimit_ratelimit_call_duration_seconds
// do Envoy's: a Service is a prometheus.Collector of them.
type stats struct {
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

func newStats() *stats {
	return &stats{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tblimit_api_calls_total",
			Help: "tblimit.v1 calls, by method and gRPC code (OK for an answer, a denial included)."}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tblimit_api_call_duration_seconds",
			Help:    "How long tblimit.v1 calls took to answer, by method and gRPC code.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"method", "code"}),
	}
}

// called counts a call of method that started at start and ended with err.
func (s *stats) called(method string, start time.Time, err error) {
	m, code := path.Base(method), status.Code(err).String()
	s.latency.WithLabelValues(m, code).Observe(time.Since(start).Seconds())
	s.calls.WithLabelValues(m, code).Inc()
}

// Describe is prometheus.Collector's.
func (s *Service) Describe(ch chan<- *prometheus.Desc) {
	s.stats.calls.Describe(ch)
	s.stats.latency.Describe(ch)
}

// Collect is prometheus.Collector's.
func (s *Service) Collect(ch chan<- prometheus.Metric) {
	s.stats.calls.Collect(ch)
	s.stats.latency.Collect(ch)
}
