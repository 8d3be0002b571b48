package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// The network fault suite: 64 callers, split across the plain, coalescing and lease modes
// (one Client each, as three processes would be), make decisions, chains, payments and
// reservations under request IDs (the fleet of cluster_test.go) through fault proxies
// (testenv.Proxy) on a real server, while the network between working parts fails: replies
// lost after the cluster applied their requests, connections that hang, a slow link, a
// replica cut off from the others. Afterwards the cluster's record is audited against
// every answer (auditFleet), and each run logs one line of figures.

const (
	netCallers = 64
	// netAllowance is what a call may take beyond its deadline before it counts as late:
	// scheduling on a 2-core machine shared with the server and other work; more when
	// timers fire later than that (netRun.late).
	netAllowance = 250 * time.Millisecond
)

// netFleet is the callers of one mode: their fleet (own ledgers and users) and Client.
type netFleet struct {
	mode    string
	f       fleet
	c       *ledger.Client
	callers int
	answers []clusterAnswer
}

// netRun is a run of the suite: one fleet per mode on a cluster, reached through
// addresses, set up and audited by admin (which reaches the cluster directly).
type netRun struct {
	t      *testing.T
	admin  *ledger.Client
	fleets []*netFleet
	stop   chan struct{}
	wg     sync.WaitGroup
	start  time.Time
	late   *testenv.Lateness
}

// startNet sets up a fleet per mode and starts its callers; deadline bounds each call.
func startNet(t *testing.T, admin *ledger.Client, clusterID uint64, addresses []string, deadline time.Duration, opts ...ledger.Option) *netRun {
	t.Helper()
	r := &netRun{t: t, admin: admin, stop: make(chan struct{}), late: testenv.WatchLateness(t)}
	for i, m := range modes {
		nf := &netFleet{mode: m.name, callers: netCallers / len(modes)}
		if i == 0 {
			nf.callers += netCallers % len(modes)
		}
		nf.f = fleet{Deadline: deadline, GiveUp: time.Minute}
		nf.f.setup(t, admin, &testenv.Backend{Real: true}, 6)
		c, err := ledger.Dial(clusterID, addresses, append(append([]ledger.Option(nil), m.opts...), opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		// A new Client's first call registers its session (0.4–0.6 s): before the faults.
		pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = c.Ping(pctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: ping through the proxies: %v", m.name, err)
		}
		nf.c = c
		r.fleets = append(r.fleets, nf)
	}
	r.start = time.Now()
	for _, nf := range r.fleets {
		outs := make([]bytes.Buffer, nf.callers)
		var mu sync.Mutex
		for w := range nf.callers {
			r.wg.Go(func() {
				f := nf.f
				f.Worker = w
				if err := f.work(nf.c, r.stop, &outs[w]); err != nil {
					t.Error(err)
				}
				answers := decodeAnswers(t, &outs[w])
				mu.Lock()
				nf.answers = append(nf.answers, answers...)
				mu.Unlock()
			})
		}
	}
	return r
}

func decodeAnswers(t *testing.T, b *bytes.Buffer) []clusterAnswer {
	var out []clusterAnswer
	dec := json.NewDecoder(b)
	for dec.More() {
		var a clusterAnswer
		if err := dec.Decode(&a); err != nil {
			t.Error(err)
			return out
		}
		out = append(out, a)
	}
	return out
}

// finish stops the callers, waits for them and audits each fleet: it fails the test on any
// problem, and logs the run's figures as what, one line per mode.
func (r *netRun) finish(what string) []netFigures {
	t := r.t
	t.Helper()
	close(r.stop)
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the callers did not finish within 2 minutes of being told to stop")
	}
	var figs []netFigures
	for _, nf := range r.fleets {
		allowance := r.late.Allowance(netAllowance)
		problems, unclaimed := claimless(nf, auditFleet(r.admin, &nf.f, nf.answers, allowance))
		fig := figures(what, nf, problems, allowance)
		fig.Unclaimed = unclaimed
		t.Log(fig)
		figs = append(figs, fig)
		if len(problems) > 0 {
			t.Errorf("%s, %s (ledger %d, the callers' seed): %d problems in what the cluster recorded:\n%s",
				what, nf.mode, nf.f.Req.Ledger, len(problems), joinLines(problems, 30))
		}
		if fig.Answered == 0 {
			t.Errorf("%s, %s: no call answered", what, nf.mode)
		}
	}
	return figs
}

// claimless takes out of a coalescing fleet's problems the admissions recorded under no
// worker's name, as many as its calls without an ID that were made again after
// ErrUnavailable: WithCoalescing documents that such a call may have been admitted by a
// transfer shared with others, under a name it never learnt, so that its retry is a new
// request. Those units were taken for nobody (never more than the limit): the run reports
// them as unclaimed. Any more than that, or any in another mode, stay problems.
func claimless(nf *netFleet, problems []string) (rest []string, unclaimed int) {
	if nf.mode != "coalescing" {
		return problems, 0
	}
	retried := 0
	for _, a := range nf.answers {
		if !a.Named && a.Tries > 1 {
			retried++
		}
	}
	for _, p := range problems {
		if strings.Contains(p, "no worker's request has that name") && unclaimed < retried {
			unclaimed++
			continue
		}
		rest = append(rest, p)
	}
	return rest, unclaimed
}

// netFigures are what a run measured, for one mode.
type netFigures struct {
	What, Mode                                           string
	Calls, Answered, Admitted, Retried, Over, Lost, Late int
	Twice                                                int // recorded more often than answered
	PaidAfterRetry                                       int // payments answered paid after a retry by ID
	Unclaimed                                            int // see claimless
	Worst                                                time.Duration
}

func (f netFigures) String() string {
	return fmt.Sprintf("%s, %s: %d calls, %d answered, %d admitted, %d retried (%d of them paid); over %d, lost %d, twice %d, unclaimed %d, past deadline %d; worst call %v",
		f.What, f.Mode, f.Calls, f.Answered, f.Admitted, f.Retried, f.PaidAfterRetry, f.Over, f.Lost, f.Twice, f.Unclaimed, f.Late, f.Worst.Round(time.Millisecond))
}

// figures counts a fleet's answers and sorts the audit's problems: over a limit, an
// admission or payment lost, one counted twice, and calls past their deadline.
func figures(what string, nf *netFleet, problems []string, allowance time.Duration) netFigures {
	fig := netFigures{What: what, Mode: nf.mode, Calls: len(nf.answers)}
	for _, a := range nf.answers {
		if a.Answered {
			fig.Answered++
			if a.Allowed {
				fig.Admitted++
			}
		}
		if a.Tries > 1 {
			fig.Retried++
			if a.Kind == 2 && a.Answered && a.Allowed {
				fig.PaidAfterRetry++
			}
		}
		if a.Slowest > nf.f.Deadline+allowance {
			fig.Late++
		}
		fig.Worst = max(fig.Worst, a.Slowest)
	}
	for _, p := range problems {
		switch {
		case strings.Contains(p, "units taken in a window"):
			fig.Over++
		case strings.Contains(p, "recorded 0 times"), strings.Contains(p, "answered paid"), strings.Contains(p, " holds "):
			fig.Lost++
		case strings.Contains(p, "recorded 2 times"), strings.Contains(p, "left unanswered, recorded"),
			strings.Contains(p, "answered denied"), strings.Contains(p, "no worker's request"):
			fig.Twice++ // or taken for a request nobody made
		}
	}
	return fig
}

// netServer returns a Client of the package's shared server for setting up and auditing,
// and a proxy in front of the server for the callers.
func netServer(t *testing.T) (admin *ledger.Client, clusterID uint64, p *testenv.Proxy) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs a real tigerbeetle server")
	}
	srv := testenv.Shared(t)
	admin = ledger.New(srv.Client(t), ledger.WithTimeout(2*time.Minute))
	p = testenv.StartProxy(t, srv.Addresses[0], testenv.WithFraming(testenv.TigerBeetleFraming))
	return admin, srv.ClusterID, p
}

// waitFor polls cond every 10 ms for at most limit, and reports whether it held.
func waitFor(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// Replies lost after the cluster applied their requests: the proxy lets a request through
// and loses its reply, then refuses connections for longer than a call's deadline, so that
// the calls waiting on that reply end unanswered and their callers retry under the same
// IDs. Each retried request is one admission and each retried payment one payment: nothing
// counted twice, nothing lost.
func TestNetLostReply(t *testing.T) {
	admin, clusterID, p := netServer(t)
	const deadline = 500 * time.Millisecond
	r := startNet(t, admin, clusterID, []string{p.Addr()}, deadline)
	lost := 0
	for range 8 {
		time.Sleep(700 * time.Millisecond)
		before := p.Stats().RepliesLost
		p.LoseReplies(1)
		if !waitFor(3*time.Second, func() bool { return p.Stats().RepliesLost > before }) {
			continue // no reply came in 3 s: nothing to lose
		}
		lost++
		p.Refuse()
		time.Sleep(deadline + 300*time.Millisecond)
		p.Heal()
	}
	time.Sleep(2 * time.Second)
	r.finish(fmt.Sprintf("lost replies (%d)", lost))
	if lost == 0 {
		t.Fatal("no reply was lost: the test proved nothing")
	}
}

// A connection that hangs (nothing forwarded, nothing closed) for 3 s, then one whose
// replies hang for 2 s while its requests go through and are applied: every call returns
// by its deadline, answered or ErrUnavailable, and the callers' retries by ID count each
// request once.
func TestNetHang(t *testing.T) {
	admin, clusterID, p := netServer(t)
	r := startNet(t, admin, clusterID, []string{p.Addr()}, 500*time.Millisecond)
	time.Sleep(2 * time.Second)
	p.Hang(testenv.Both)
	time.Sleep(3 * time.Second)
	p.Heal()
	time.Sleep(2 * time.Second)
	p.Hang(testenv.Down)
	time.Sleep(2 * time.Second)
	p.Heal()
	time.Sleep(2 * time.Second)
	r.finish("hung connection")
}

// A slow link, 100 ms each way, for the whole run: calls are answered or return
// ErrUnavailable by their deadline; nothing over, nothing lost.
func TestNetSlowLink(t *testing.T) {
	admin, clusterID, p := netServer(t)
	p.Delay(testenv.Both, 100*time.Millisecond)
	r := startNet(t, admin, clusterID, []string{p.Addr()}, time.Second)
	time.Sleep(10 * time.Second)
	r.finish("slow link, 100 ms each way")
}

// While the connection hangs, FailOpen admits and FailClosed denies, without an error and
// by the deadline; a payment is never made open: it returns ErrUnavailable under either.
// What the cluster answered is recorded, and no user is over its limit in its record.
func TestNetUnavailablePolicies(t *testing.T) {
	admin, clusterID, p := netServer(t)
	for _, policy := range []ledger.OnUnavailable{ledger.FailOpen, ledger.FailClosed} {
		t.Run(policy.String(), func(t *testing.T) {
			p.Heal()
			const deadline = 300 * time.Millisecond
			r := startPolicyRun(t, admin, clusterID, p.Addr(), policy, deadline)
			time.Sleep(1500 * time.Millisecond)
			p.Hang(testenv.Both)
			time.Sleep(2 * time.Second)
			p.Heal()
			time.Sleep(1500 * time.Millisecond)
			r.finish(t, admin, deadline)
		})
	}
}

// policyRun is callers that each make single calls (no retries) under a policy.
type policyRun struct {
	policy ledger.OnUnavailable
	fleets []*netFleet
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	tally  []policyTally // per fleet
	late   *testenv.Lateness
}

// policyTally is what the calls of one fleet returned.
type policyTally struct {
	calls, byCluster, byPolicy, late int
	worst                            time.Duration
	admitted                         []policyCall // admissions the cluster answered, to find in its record
	problems                         []string
}

// policyCall is one call of a policyRun and what it returned.
type policyCall struct {
	fleet   int
	pay     bool
	d       ledger.Decision
	err     error
	took    time.Duration
	problem string
}

func startPolicyRun(t *testing.T, admin *ledger.Client, clusterID uint64, addr string, policy ledger.OnUnavailable, deadline time.Duration) *policyRun {
	t.Helper()
	r := &policyRun{policy: policy, stop: make(chan struct{}), tally: make([]policyTally, len(modes))}
	base := startNet(t, admin, clusterID, []string{addr}, deadline, ledger.WithUnavailable(policy))
	r.late = base.late
	close(base.stop) // only its fleets and Clients are wanted
	base.wg.Wait()
	for i, nf := range base.fleets {
		nf.answers = nil
		r.fleets = append(r.fleets, nf)
		for w := range nf.callers {
			r.wg.Go(func() {
				for seq := 0; ; seq++ {
					select {
					case <-r.stop:
						return
					default:
					}
					r.add(r.call(i, nf, w, seq, deadline), deadline)
					// A denial answered in memory takes microseconds: without a
					// pause a caller would spin on a shared 2-core machine.
					time.Sleep(time.Millisecond)
				}
			})
		}
	}
	return r
}

// call makes one Acquire or Pay and returns what it returned and any broken promise.
func (r *policyRun) call(i int, nf *netFleet, w, seq int, deadline time.Duration) policyCall {
	user := nf.f.Users[(w+seq)%len(nf.f.Users)]
	k := policyCall{fleet: i, pay: seq%4 == 3}
	cctx, cancel := context.WithTimeout(context.Background(), deadline)
	start := time.Now()
	if k.pay {
		to := nf.f.Users[(w+seq+1)%len(nf.f.Users)]
		k.d, k.err = nf.c.Pay(cctx, nf.f.Money, ledger.Payment{From: user, To: to, Amount: 1})
	} else {
		k.d, k.err = nf.c.Acquire(cctx, nf.f.Req, ledger.Request{User: user, Amount: 1})
	}
	k.took = time.Since(start)
	cancel()
	unavailable := errors.Is(k.err, ledger.ErrUnavailable)
	switch {
	case k.err != nil && !unavailable:
		k.problem = "error: " + k.err.Error()
	case k.pay && k.err == nil && k.d.Reason == ledger.Unavailable:
		k.problem = "a payment unanswered returned no error"
	case k.pay && k.d.Allowed && k.err != nil:
		k.problem = "a payment unanswered was allowed"
	case !k.pay && unavailable:
		k.problem = fmt.Sprintf("unanswered under %v returned the error", r.policy)
	case !k.pay && k.d.Reason == ledger.Unavailable && k.d.Allowed != (r.policy == ledger.FailOpen):
		k.problem = fmt.Sprintf("unanswered under %v: allowed %v", r.policy, k.d.Allowed)
	}
	return k
}

// add counts call k in its fleet's tally.
func (r *policyRun) add(k policyCall, deadline time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	y := &r.tally[k.fleet]
	y.calls++
	y.worst = max(y.worst, k.took)
	if k.took > deadline+r.late.Allowance(netAllowance) {
		y.late++
		y.problems = append(y.problems, fmt.Sprintf("a call took %v with a deadline of %v", k.took, deadline))
	}
	if k.problem != "" {
		y.problems = append(y.problems, fmt.Sprintf("%s (%+v, %v)", k.problem, k.d, k.err))
	}
	switch {
	case k.d.Reason == ledger.Unavailable:
		y.byPolicy++
	case k.err == nil:
		y.byCluster++
		if k.d.Allowed {
			y.admitted = append(y.admitted, k)
		}
	}
}

// finish stops the callers and checks every call and the cluster's record of each fleet.
func (r *policyRun) finish(t *testing.T, admin *ledger.Client, deadline time.Duration) {
	t.Helper()
	close(r.stop)
	r.wg.Wait()
	for i, nf := range r.fleets {
		recorded := map[uint32]map[string]int{}
		over := 0
		for _, res := range []ledger.Resource{nf.f.Req, nf.f.Money} {
			recorded[res.Ledger] = map[string]int{}
			users, err := admin.Users(ctx, res)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range users {
				a, err := admin.Audit(ctx, res, u.Key, time.Time{}, time.Time{})
				if err != nil {
					t.Fatal(err)
				}
				if !a.OK() {
					over++
					t.Errorf("%s on %s over its limit: %+v", u.Key, res.Name, a)
				}
				h, err := admin.History(ctx, res, u.Key, time.Time{}, time.Time{}, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, adm := range h {
					recorded[res.Ledger][adm.ID.String()]++
				}
			}
		}
		y := &r.tally[i]
		fig := netFigures{What: "hung connection, " + r.policy.String(), Mode: nf.mode, Over: over,
			Calls: y.calls, Answered: y.byCluster, Admitted: len(y.admitted), Late: y.late, Worst: y.worst}
		for _, k := range y.admitted {
			l := nf.f.Req.Ledger
			if k.pay {
				l = nf.f.Money.Ledger
			}
			if n := recorded[l][k.d.ID.String()]; n != 1 {
				fig.Lost++
				y.problems = append(y.problems, fmt.Sprintf("admission %s answered by the cluster, recorded %d times", k.d.ID, n))
			}
		}
		for _, p := range y.problems[:min(len(y.problems), 30)] {
			t.Errorf("%s: %s", nf.mode, p)
		}
		policyAnswers := y.byPolicy
		t.Logf("%v; %d answered by the policy", fig, policyAnswers)
		if policyAnswers == 0 && nf.mode != "leases" {
			t.Errorf("%s: no call was answered by the policy: the hang proved nothing", nf.mode)
		}
	}
}

// One replica of three cut off from the other two (its links blackholed both ways, nothing
// closed; clients still reach it), then healed: first a replica the Clients do not send
// their requests to, then the one they do. Decisions go on through the other two; nothing
// over, nothing lost.
func TestNetPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs a real tigerbeetle cluster")
	}
	cl, m := testenv.StartMeshCluster(t, 3)
	admin := ledger.New(cl.Client(t), ledger.WithTimeout(2*time.Minute))
	r := startNet(t, admin, cl.ClusterID, m.Addresses(), time.Second)
	time.Sleep(2 * time.Second)
	talks := busiestFront(m, time.Second)
	var cuts [][2]time.Time
	for _, cut := range []int{(talks + 1) % 3, talks} {
		t.Logf("cutting replica %d off (the Clients send to replica %d)", cut, talks)
		m.Isolate(cut)
		from := time.Now()
		time.Sleep(5 * time.Second)
		cuts = append(cuts, [2]time.Time{from, time.Now()})
		m.Heal()
		time.Sleep(3 * time.Second)
	}
	r.finish("replica cut off, a backup then the one the Clients talk to")
	for i, cut := range cuts {
		n := 0
		for _, nf := range r.fleets {
			for _, a := range nf.answers {
				if a.Answered && a.At.After(cut[0]) && a.At.Before(cut[1]) {
					n++
				}
			}
		}
		t.Logf("cut-off %d: %d calls answered in its %v", i, n, cut[1].Sub(cut[0]).Round(time.Millisecond))
		if n == 0 {
			t.Errorf("cut-off %d: no call was answered while one replica was cut off", i)
		}
	}
}

// busiestFront returns the replica whose front proxy carried the most bytes from clients
// over d: the one the Clients send their requests to.
func busiestFront(m *testenv.Mesh, d time.Duration) int {
	var before [3]int64
	for i := range before {
		before[i] = m.Front(i).Stats().Up
	}
	time.Sleep(d)
	best, most := 0, int64(-1)
	for i := range before {
		if n := m.Front(i).Stats().Up - before[i]; n > most {
			best, most = i, n
		}
	}
	return best
}
