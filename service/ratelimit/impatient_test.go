package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/service/ratelimit"
	"github.com/tblimit/tblimit/testenv"
)

// The service under callers that give up at 20 ms, Envoy's default rate limit timeout,
// while the link between the service's Client and a real server (a testenv.Proxy) is by
// turns clear, a few milliseconds slow, slower than the callers wait, and hung. Afterwards:
// no goroutine or heap growth, every admission a caller was answered in the cluster's
// record, the service's count of admissions reconciled with that record, no user over its
// limit, and the calls past MaxWaiting refused at once. TBLIMIT_SOAK=10m runs it for
// longer; each run logs one line of figures, then one per phase of the link.

const (
	impCallers    = 64
	impConns      = 4                     // gRPC connections the callers share, as an Envoy's workers would
	impEvery      = 20 * time.Millisecond // each caller's interval between calls: 3,200 calls a second in all
	impDeadline   = 20 * time.Millisecond
	impMaxWaiting = 16
	impLimit      = 5 // per second
	impHotKeys    = 8
	impColdKeys   = 2000
	// impGoroutineSlack is how many goroutines more than before the callers started may
	// remain once they stopped and the service drained: timers and connections of the
	// runtime, gRPC and the TigerBeetle client that come and go.
	impGoroutineSlack = 8
	// The live heap may grow over the steady phase by impHeapNoise (what a collection
	// leaves depends on the instant: buffers of calls in flight) and impHeapPerMinute:
	// every key is known by then, and nothing the service keeps should grow.
	impHeapNoise     = 4 << 20
	impHeapPerMinute = 1 << 20
	// impMinOK is the fewest OK answers for a run to prove something of the record: a
	// machine too loaded to answer within 20 ms (under -race, say) skips the test once
	// every check has passed.
	impMinOK = 100
)

func TestImpatientCallers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs a real tigerbeetle server")
	}
	run, warm := 20*time.Second, 3*time.Second
	if s := os.Getenv("TBLIMIT_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("TBLIMIT_SOAK=%q: want a duration such as 10m", s)
		}
		run, warm = d, 30*time.Second
	}
	e := startImpatient(t)
	keys := make([]string, 0, impHotKeys+impColdKeys)
	for i := range impHotKeys {
		keys = append(keys, fmt.Sprintf("hot-%d", i))
	}
	for i := range impColdKeys {
		keys = append(keys, fmt.Sprintf("cold-%04d", i))
	}
	ok := make([]atomic.Int64, len(keys)) // OK answers per key
	callers := make([]*impCaller, impCallers)
	for w := range callers {
		callers[w] = &impCaller{}
	}

	baseline := sampleProcess()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, y := range callers {
		wg.Go(func() { y.callUntil(stop, e, e.clients[w%impConns], keys, ok) })
	}
	first, last, cycles := e.faultCycles(time.Now(), warm, run)
	close(stop)
	wg.Wait()
	e.link.Heal()
	// Drained: every request the Client sent is answered (the link is clear), and the
	// calls it made in the background end.
	after := sampleProcess()
	for end := time.Now().Add(30 * time.Second); after.goroutines > baseline.goroutines+impGoroutineSlack && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		after = sampleProcess()
	}

	r := impRun{run: run, cycles: cycles, baseline: baseline, first: first, last: last, after: after, total: sumCallers(callers)}
	r.sf = gatherService(t, e.reg, e.domain)
	r.rec = auditRule(t, e.admin, e.res)
	r.lost = checkRecord(t, keys, ok, r.total, r.sf, r.rec)
	t.Log(r)
	for ph := range impPhases {
		y := impCaller{outcomes: r.total.byPhase[ph]}
		t.Logf("link %s: %d calls: %s", impPhaseNames[ph], y.count(), y.summary())
	}
	checkAnswers(t, r.total, r.sf)
	if after.goroutines > baseline.goroutines+impGoroutineSlack {
		t.Errorf("goroutines: %d before the callers, %d 30 s after they stopped; want at most %d more", baseline.goroutines, after.goroutines, impGoroutineSlack)
	}
	if steady, growth := r.steady(); float64(growth) > impHeapNoise+impHeapPerMinute*steady.Minutes() {
		t.Errorf("live heap grew by %s over %v of steady load (%s to %s); want at most %s + %s a minute",
			mib(uint64(growth)), steady.Round(time.Second), mib(first.heap), mib(last.heap), mib(impHeapNoise), mib(impHeapPerMinute))
	}
	if n := r.total.outcomes[impOK]; n < impMinOK {
		t.Skipf("only %d calls answered OK within %v: a machine this loaded (or -race) leaves too few admissions for the record to prove much", n, impDeadline)
	}
}

// impRun is what a run measured.
type impRun struct {
	run                          time.Duration
	cycles                       int
	baseline, first, last, after impSample // before the callers, the steady phase's ends, drained
	total                        *impCaller
	sf                           serviceFigures
	rec                          ruleRecord
	lost                         int
}

// steady is how long the steady phase lasted and how much the live heap grew in it.
func (r impRun) steady() (time.Duration, int64) {
	return r.last.at.Sub(r.first.at), int64(r.last.heap) - int64(r.first.heap)
}

func (r impRun) String() string {
	steady, growth := r.steady()
	ex := &r.total.lat[impExhausted]
	return fmt.Sprintf("%v (%d fault cycles), %d callers at %v, MaxWaiting %d: %d calls: %s; "+
		"recorded admissions %d (the service counted %d, %d applied after it stopped waiting), over %d, lost %d; "+
		"RESOURCE_EXHAUSTED at the caller p50 %v, p99 %v, in the service %s; "+
		"goroutines %d before, %d/%d steady, %d after; live heap %s before, %s/%s steady (%+.2f MiB a minute), %s after",
		r.run, r.cycles, impCallers, impDeadline, impMaxWaiting, r.total.count(), r.total.summary(),
		r.rec.total, r.sf.admitted, r.rec.total-r.sf.admitted, len(r.rec.over), r.lost,
		ex.quantile(0.5), ex.quantile(0.99), r.sf.exhaustedLatency(),
		r.baseline.goroutines, r.first.goroutines, r.last.goroutines, r.after.goroutines,
		mib(r.baseline.heap), mib(r.first.heap), mib(r.last.heap), float64(growth)/steady.Minutes()/(1<<20), mib(r.after.heap))
}

// impEnv is a service whose Client reaches a real server through link, serving gRPC to
// clients, and a Client that reaches the server directly to read its record.
type impEnv struct {
	link    *testenv.Proxy
	phase   atomic.Int32 // the link's phase, for the callers' tallies (see faultCycles)
	admin   *ledger.Client
	svc     *ratelimit.Service
	res     ledger.Resource // the rule's
	reg     *prometheus.Registry
	domain  string
	clients []rls.RateLimitServiceClient
}

// startImpatient serves one rule, impLimit a second for each value of "user", with
// MaxWaiting(impMaxWaiting), and connects impConns gRPC clients.
func startImpatient(t *testing.T) *impEnv {
	t.Helper()
	srv := testenv.Shared(t)
	e := &impEnv{admin: ledger.New(srv.Client(t), ledger.WithTimeout(2*time.Minute)), domain: domainOf(t), reg: prometheus.NewRegistry()}
	e.link = testenv.StartProxy(t, srv.Addresses[0], testenv.WithFraming(testenv.TigerBeetleFraming))
	c, err := ledger.Dial(srv.ClusterID, []string{e.link.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if e.svc, err = ratelimit.New(c, ratelimit.MaxWaiting(impMaxWaiting)); err != nil {
		t.Fatal(err)
	}
	// The first calls register the Client's session, create the rule's resource and
	// provision a user: a deadline well beyond them.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.svc.Load(ctx, config(t, e.domain, fmt.Sprintf(`
domain: DOMAIN
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: %d}
`, impLimit))); err != nil {
		t.Fatal(err)
	}
	e.res, _ = e.svc.Resource(mustRule(t, e.svc))
	addr := serveOn(t, e.svc, e.reg)
	for range impConns {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		rc := rls.NewRateLimitServiceClient(conn)
		if _, err := rc.ShouldRateLimit(ctx, &rls.RateLimitRequest{Domain: e.domain,
			Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "warm-up")}}); err != nil {
			t.Fatal(err)
		}
		e.clients = append(e.clients, rc)
	}
	return e
}

// serveOn serves svc's gRPC on a free loopback port, with its metrics on reg, until the
// test ends; it returns the address.
func serveOn(t *testing.T, svc *ratelimit.Service, reg *prometheus.Registry) string {
	t.Helper()
	srv, err := ratelimit.NewServer(svc, ratelimit.ServerOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln, nil) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	return ln.Addr().String()
}

// The link's phases (see faultCycles).
const (
	impClear = iota
	impJitter
	impSlow
	impHung
	impPhases
)

var impPhaseNames = [impPhases]string{"clear", "1–6 ms each way", "15–40 ms each way", "hung"}

// faultCycles runs the link through its phases until run has passed since start, in
// cycles: clear 2 s; 1–6 ms each way 2 s; 15–40 ms each way 2 s, slower than a caller
// waits; hung both ways 1 s. A delay is drawn anew, each way, every 200 ms. It samples the
// process at the end of the first clear phase after warm, and of the last one, and returns
// the samples and how many cycles ran.
func (e *impEnv) faultCycles(start time.Time, warm, run time.Duration) (first, last impSample, cycles int) {
	defer e.phase.Store(impClear)
	jitter := func(ph int32, lo, hi time.Duration, d time.Duration) {
		e.phase.Store(ph)
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			e.link.Delay(testenv.Up, lo+rand.N(hi-lo))
			e.link.Delay(testenv.Down, lo+rand.N(hi-lo))
		}
	}
	for ; ; cycles++ {
		e.link.Heal()
		e.phase.Store(impClear)
		time.Sleep(2 * time.Second)
		switch since := time.Since(start); {
		case first.at.IsZero() && since >= warm:
			first = sampleProcess()
		case !first.at.IsZero() && since >= run:
			return first, sampleProcess(), cycles
		}
		jitter(impJitter, time.Millisecond, 6*time.Millisecond, 2*time.Second)
		jitter(impSlow, 15*time.Millisecond, 40*time.Millisecond, 2*time.Second)
		e.link.Heal()
		e.link.Hang(testenv.Both)
		e.phase.Store(impHung)
		time.Sleep(time.Second)
	}
}

// impOutcome is what a caller got from a call.
type impOutcome int

const (
	impOK impOutcome = iota
	impOver
	impExhausted   // RESOURCE_EXHAUSTED: past MaxWaiting
	impUnavailable // UNAVAILABLE: the cluster did not answer the service in time
	impLate        // DEADLINE_EXCEEDED at the caller
	impOther
	impOutcomes
)

var impNames = [impOutcomes]string{"OK", "OVER_LIMIT", "RESOURCE_EXHAUSTED", "UNAVAILABLE", "deadline exceeded at the caller", "other"}

// impCaller is what one caller's calls got, or the sum of several callers'.
type impCaller struct {
	outcomes [impOutcomes]int64
	byPhase  [impPhases][impOutcomes]int64 // by the link's phase when the call began
	lat      [impOutcomes]latencies
	other    string // the first unexpected answer
}

// callUntil makes calls until stop, one every impEvery (as requests come to an Envoy,
// whatever became of the last: a call that took longer delays the next, which then starts
// at once), each with impDeadline, for a key half of the time among the first impHotKeys
// of keys, else among the rest, and tallies what came back in y and the OK answers in ok.
func (y *impCaller) callUntil(stop <-chan struct{}, e *impEnv, c rls.RateLimitServiceClient, keys []string, ok []atomic.Int64) {
	next := time.Now().Add(rand.N(impEvery))
	for {
		time.Sleep(time.Until(next))
		next = later(next.Add(impEvery), time.Now())
		select {
		case <-stop:
			return
		default:
		}
		k := rand.IntN(impHotKeys)
		if rand.IntN(2) == 0 {
			k = impHotKeys + rand.IntN(len(keys)-impHotKeys)
		}
		ph := e.phase.Load()
		ctx, cancel := context.WithTimeout(context.Background(), impDeadline)
		begin := time.Now()
		resp, err := c.ShouldRateLimit(ctx, &rls.RateLimitRequest{Domain: e.domain, Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", keys[k])}})
		took := time.Since(begin)
		cancel()
		o := impOther
		switch code := status.Code(err); {
		case err == nil && resp.GetOverallCode() == rls.RateLimitResponse_OK:
			o = impOK
			ok[k].Add(1)
		case err == nil && resp.GetOverallCode() == rls.RateLimitResponse_OVER_LIMIT:
			o = impOver
		case code == codes.ResourceExhausted:
			o = impExhausted
		case code == codes.Unavailable:
			o = impUnavailable
		case code == codes.DeadlineExceeded:
			o = impLate
		case y.other == "":
			y.other = fmt.Sprintf("%v (response %v)", err, resp)
		}
		y.outcomes[o]++
		y.byPhase[ph][o]++
		y.lat[o].add(took)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func sumCallers(callers []*impCaller) *impCaller {
	var total impCaller
	for _, y := range callers {
		for o := range impOutcomes {
			total.outcomes[o] += y.outcomes[o]
			for ph := range impPhases {
				total.byPhase[ph][o] += y.byPhase[ph][o]
			}
			total.lat[o].merge(&y.lat[o])
		}
		if total.other == "" {
			total.other = y.other
		}
	}
	return &total
}

func (y *impCaller) count() int64 {
	var n int64
	for _, k := range y.outcomes {
		n += k
	}
	return n
}

// summary is the count of each outcome, with the longest call of each when known.
func (y *impCaller) summary() string {
	var parts []string
	for o := range impOutcomes {
		if o == impOther && y.outcomes[o] == 0 {
			continue
		}
		s := fmt.Sprintf("%d %s", y.outcomes[o], impNames[o])
		if w := y.lat[o].worst; w > 0 {
			s += fmt.Sprintf(" (longest %v)", w.Round(10*time.Microsecond))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// checkAnswers checks that each kind of answer but OK (see impMinOK) happened, or the
// run proved nothing, that none was unexpected, and that the calls past MaxWaiting were
// refused at once.
func checkAnswers(t *testing.T, total *impCaller, sf serviceFigures) {
	t.Helper()
	for _, o := range []impOutcome{impOver, impExhausted} {
		if total.outcomes[o] == 0 {
			t.Errorf("no call was answered %s", impNames[o])
		}
	}
	if total.outcomes[impUnavailable]+total.outcomes[impLate] == 0 {
		t.Error("no call went unanswered: the link was never slower than the callers wait")
	}
	if n := total.outcomes[impOther]; n > 0 {
		t.Errorf("%d calls failed otherwise, the first with %s", n, total.other)
	}
	// The service refuses past MaxWaiting without waiting for anything: nearly every
	// such answer takes it well under a millisecond. The bound allows for a 2-core
	// machine shared with the server and the callers; how long the callers saw those
	// answers take (gRPC both ways, and the callers' own scheduling) is logged.
	if slow := sf.exhaustedOver(6400 * time.Microsecond); slow*100 > sf.exhausted {
		t.Errorf("%d of %d RESOURCE_EXHAUSTED answers took the service over 6.4 ms", slow, sf.exhausted)
	}
}

// checkRecord checks what the cluster recorded against what the callers were answered
// (ok, per key) and what the service counted, and returns how many answered admissions
// were not recorded.
func checkRecord(t *testing.T, keys []string, ok []atomic.Int64, total *impCaller, sf serviceFigures, rec ruleRecord) (lost int) {
	t.Helper()
	// Every admission a caller was answered is recorded (a call its caller gave up on
	// may be recorded without having been answered), and no user was ever over its
	// limit.
	for k, v := range keys {
		n := int(ok[k].Load())
		if got := rec.holds[ratelimit.UserKey([]string{v})]; got < n {
			lost += n - got
			t.Errorf("user %s: %d admissions answered OK, %d recorded", v, n, got)
		}
	}
	for _, p := range rec.over {
		t.Errorf("over its limit: %s", p)
	}
	// The service counted each admission it answered once: at least every OK a caller
	// got (others it answered after their callers gave up), at most what the cluster
	// recorded. The rest the cluster applied after the service had stopped waiting,
	// each for a call it answered UNAVAILABLE.
	late := rec.total - sf.admitted
	switch {
	case sf.admitted < total.outcomes[impOK]:
		t.Errorf("the service counted %d admissions, but callers were answered OK %d times", sf.admitted, total.outcomes[impOK])
	case late < 0:
		t.Errorf("the service counted %d admissions, the cluster recorded %d: %d counted twice", sf.admitted, rec.total, -late)
	case late > sf.unanswered:
		t.Errorf("the cluster recorded %d admissions, the service counted %d and answered %d calls UNAVAILABLE: %d unaccounted for",
			rec.total, sf.admitted, sf.unanswered, late-sf.unanswered)
	}
	return lost
}

// latencies is a histogram of call durations in 50 µs buckets up to 100 ms, and the
// longest.
type latencies struct {
	n     [2000]int64
	count int64
	worst time.Duration
}

const latBucket = 50 * time.Microsecond

func (l *latencies) add(d time.Duration) {
	l.n[min(int(d/latBucket), len(l.n)-1)]++
	l.count++
	l.worst = max(l.worst, d)
}

func (l *latencies) merge(o *latencies) {
	for i := range l.n {
		l.n[i] += o.n[i]
	}
	l.count += o.count
	l.worst = max(l.worst, o.worst)
}

// quantile is the upper bound of the bucket of quantile q.
func (l *latencies) quantile(q float64) time.Duration {
	want := int64(q * float64(l.count))
	var seen int64
	for i, n := range l.n {
		if seen += n; seen > want {
			return time.Duration(i+1) * latBucket
		}
	}
	return l.worst
}

// impSample is the process's goroutines and live heap at one instant.
type impSample struct {
	at         time.Time
	goroutines int
	heap       uint64
}

// sampleProcess collects garbage, then reads the goroutines and the live heap.
func sampleProcess() impSample {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return impSample{at: time.Now(), goroutines: runtime.NumGoroutine(), heap: s[0].Value.Uint64()}
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// serviceFigures are what the service's own metrics say of a run.
type serviceFigures struct {
	admitted   int64 // hits admitted (within and near the limit)
	unanswered int64 // calls answered UNAVAILABLE, DEADLINE_EXCEEDED or CANCELLED
	exhausted  int64 // calls answered RESOURCE_EXHAUSTED
	buckets    []*dto.Bucket
}

func gatherService(t *testing.T, reg *prometheus.Registry, domain string) serviceFigures {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var f serviceFigures
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetName() {
			case "tblimit_ratelimit_within_limit_total", "tblimit_ratelimit_near_limit_total":
				if labels["domain"] == domain {
					f.admitted += int64(m.GetCounter().GetValue())
				}
			case "tblimit_ratelimit_call_duration_seconds":
				n := int64(m.GetHistogram().GetSampleCount())
				switch labels["code"] {
				case codes.Unavailable.String(), codes.DeadlineExceeded.String(), codes.Canceled.String():
					f.unanswered += n
				case codes.ResourceExhausted.String():
					f.exhausted = n
					f.buckets = m.GetHistogram().GetBucket()
				}
			}
		}
	}
	return f
}

// exhaustedOver is how many RESOURCE_EXHAUSTED answers took the service longer than d, a
// bound of its histogram's buckets.
func (f serviceFigures) exhaustedOver(d time.Duration) int64 {
	for _, b := range f.buckets {
		if time.Duration(b.GetUpperBound()*float64(time.Second)) >= d {
			return f.exhausted - int64(b.GetCumulativeCount())
		}
	}
	return f.exhausted
}

// exhaustedLatency says how the service's RESOURCE_EXHAUSTED answers took, in its
// histogram's buckets up to 6.4 ms.
func (f serviceFigures) exhaustedLatency() string {
	var parts []string
	for _, b := range f.buckets {
		if b.GetUpperBound() > 0.0065 {
			break
		}
		parts = append(parts, fmt.Sprintf("%.2f%% ≤ %v", 100*float64(b.GetCumulativeCount())/float64(max(f.exhausted, 1)),
			time.Duration(b.GetUpperBound()*float64(time.Second)).Round(time.Microsecond)))
	}
	return strings.Join(parts, ", ")
}

// ruleRecord is what the cluster recorded on a rule's ledger.
type ruleRecord struct {
	holds map[string]int // by user key
	total int64
	over  []string // users over their limit in some window
}

// auditRule reads every user's holds on res and checks that none was ever over its limit.
func auditRule(t *testing.T, c *ledger.Client, res ledger.Resource) ruleRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	users, err := c.Users(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	rec := ruleRecord{holds: map[string]int{}}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(8)
	for _, u := range users {
		g.Go(func() error {
			a, err := c.Audit(ctx, res, u.Key, time.Time{}, time.Time{})
			if err != nil {
				return fmt.Errorf("audit %s: %w", u.Key, err)
			}
			mu.Lock()
			defer mu.Unlock()
			rec.holds[u.Key] = a.Holds
			rec.total += int64(a.Holds)
			if !a.OK() {
				rec.over = append(rec.over, fmt.Sprintf("%s: %d taken in a window from %v, %d in flight at once; limit %d",
					u.Key, a.MostInWindow, a.WindowStart, a.MostInFlight, a.Limit))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(rec.over)
	return rec
}
