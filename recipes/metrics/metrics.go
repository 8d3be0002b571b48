// Package metrics exports tblimit's decisions and what they cost to Prometheus.
//
// A Collector is a recipes.Observer (give it to Limiters and Stacks with
// recipes.WithObserver) and a ledger.Observer (give it to a ledger.Client
// with ledger.WithObserver, for the single-limit recipes), and a
// prometheus.Collector to register. It lives in its own package so that
// tblimit's other packages do not depend on the Prometheus client; another
// metrics or tracing system (OpenTelemetry) implements the same two small
// observer interfaces.
package metrics

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/recipes"
)

// Collector counts decisions and reads a ledger.Client's Stats. It exports:
//
//	tblimit_decisions_total{limiter,outcome}            decisions of Limiters and Stacks; outcome is
//	                                                    admitted, denied, shadow-denied, unavailable or error
//	tblimit_decision_duration_seconds{limiter}          how long they took (histogram)
//	tblimit_policy_denials_total{limiter,policy,mode}   which policy denied (mode enforced) or would have (shadow)
//	tblimit_resource_decisions_total{resource,outcome}  decisions a ledger.Client made per resource (ledger.Observer)
//	tblimit_tigerbeetle_requests_total{operation}       requests (calls) the Client sent to TigerBeetle
//	tblimit_tigerbeetle_events_total{operation}         events they carried: transfers, accounts, IDs, filters
//	tblimit_local_denials_total                         decisions denied without I/O (a user known to be drained)
//	tblimit_lease_admissions_total                      decisions admitted from a lease without I/O
//
// Observe on a Collector is safe for concurrent use and takes a few
// atomic additions.
type Collector struct {
	client atomic.Pointer[ledger.Client] // nil: none

	decisions, denials, resources *prometheus.CounterVec
	latency                       *prometheus.HistogramVec
	requests, events              *prometheus.Desc
	localDenials, leaseAdmissions *prometheus.Desc
	unanswered, reconnects        *prometheus.Desc
}

// New returns a Collector that also exports what c sent to TigerBeetle (c
// may be nil: see Watch).
func New(c *ledger.Client) *Collector {
	m := &Collector{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tblimit_decisions_total", Help: "Decisions of tblimit Limiters and Stacks, by outcome.",
		}, []string{"limiter", "outcome"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tblimit_policy_denials_total", Help: "Policies that denied a request (mode enforced) or would have (mode shadow).",
		}, []string{"limiter", "policy", "mode"}),
		resources: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tblimit_resource_decisions_total", Help: "Decisions a ledger.Client made, per resource, by outcome.",
		}, []string{"resource", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tblimit_decision_duration_seconds", Help: "How long decisions of tblimit Limiters and Stacks took.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"limiter"}),
		requests:        prometheus.NewDesc("tblimit_tigerbeetle_requests_total", "Requests (calls) a ledger.Client sent to TigerBeetle, by operation.", []string{"operation"}, nil),
		events:          prometheus.NewDesc("tblimit_tigerbeetle_events_total", "Events (transfers, accounts, IDs, filters) a ledger.Client sent to TigerBeetle, by operation.", []string{"operation"}, nil),
		localDenials:    prometheus.NewDesc("tblimit_local_denials_total", "Decisions denied without any I/O, on the view of a user known to be drained.", nil, nil),
		leaseAdmissions: prometheus.NewDesc("tblimit_lease_admissions_total", "Decisions admitted from a lease without any I/O.", nil, nil),
		unanswered: prometheus.NewDesc("tblimit_tigerbeetle_unanswered_total",
			"Calls that reached their deadline without the cluster's answer; connected=\"never\": the cluster had not answered the Client at all yet (no connection).",
			[]string{"connected"}, nil),
		reconnects: prometheus.NewDesc("tblimit_tigerbeetle_reconnects_total", "New TigerBeetle clients opened after the cluster evicted a session.", nil, nil),
	}
	m.Watch(c)
	return m
}

// Watch makes m export what c sent to TigerBeetle, for a Collector that
// had to exist before c: one given to c itself with ledger.WithObserver.
func (m *Collector) Watch(c *ledger.Client) { m.client.Store(c) }

// ObserveResult counts a decision of a Limiter or a Stack.
func (m *Collector) ObserveResult(e recipes.Event) {
	m.decisions.WithLabelValues(e.Limiter, e.Outcome().String()).Inc()
	m.latency.WithLabelValues(e.Limiter).Observe(e.Took.Seconds())
	if e.Result.DeniedBy != "" {
		m.denials.WithLabelValues(e.Limiter, e.Result.DeniedBy, "enforced").Inc()
	}
	for _, p := range e.Result.ShadowDenied {
		m.denials.WithLabelValues(e.Limiter, p, "shadow").Inc()
	}
}

// ObserveDecision counts a decision a ledger.Client made on one resource.
func (m *Collector) ObserveDecision(e ledger.DecisionEvent) {
	outcome := recipes.OutcomeAdmitted
	switch {
	case errors.Is(e.Err, ledger.ErrUnavailable) || e.Decision.Reason == ledger.Unavailable:
		outcome = recipes.OutcomeUnavailable
	case e.Err != nil:
		outcome = recipes.OutcomeError
	case !e.Decision.Allowed:
		outcome = recipes.OutcomeDenied
	}
	m.resources.WithLabelValues(e.Resource.Name, outcome.String()).Inc()
}

// Describe sends the descriptions of every metric.
func (m *Collector) Describe(ch chan<- *prometheus.Desc) {
	m.decisions.Describe(ch)
	m.denials.Describe(ch)
	m.resources.Describe(ch)
	m.latency.Describe(ch)
	ch <- m.requests
	ch <- m.events
	ch <- m.localDenials
	ch <- m.leaseAdmissions
	ch <- m.unanswered
	ch <- m.reconnects
}

// Collect sends every metric, reading the Client's Stats once.
func (m *Collector) Collect(ch chan<- prometheus.Metric) {
	m.decisions.Collect(ch)
	m.denials.Collect(ch)
	m.resources.Collect(ch)
	m.latency.Collect(ch)
	c := m.client.Load()
	if c == nil {
		return
	}
	s := c.Stats()
	for op, o := range map[string]ledger.OpStats{
		"create_accounts":       s.CreateAccounts,
		"create_transfers":      s.CreateTransfers,
		"lookup_accounts":       s.LookupAccounts,
		"lookup_transfers":      s.LookupTransfers,
		"get_account_transfers": s.GetAccountTransfers,
		"query_accounts":        s.QueryAccounts,
		"query_transfers":       s.QueryTransfers,
	} {
		ch <- prometheus.MustNewConstMetric(m.requests, prometheus.CounterValue, float64(o.Requests), op)
		ch <- prometheus.MustNewConstMetric(m.events, prometheus.CounterValue, float64(o.Events), op)
	}
	ch <- prometheus.MustNewConstMetric(m.localDenials, prometheus.CounterValue, float64(s.LocalDenials))
	ch <- prometheus.MustNewConstMetric(m.leaseAdmissions, prometheus.CounterValue, float64(s.LeaseAdmissions))
	ch <- prometheus.MustNewConstMetric(m.unanswered, prometheus.CounterValue, float64(s.Unanswered-s.NeverAnswered), "yes")
	ch <- prometheus.MustNewConstMetric(m.unanswered, prometheus.CounterValue, float64(s.NeverAnswered), "never")
	ch <- prometheus.MustNewConstMetric(m.reconnects, prometheus.CounterValue, float64(s.Reconnects))
}

var (
	_ recipes.Observer     = (*Collector)(nil)
	_ ledger.Observer      = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)
