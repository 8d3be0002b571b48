package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
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
	// scheduling on a 2-core machine shared with the server and other work.
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
}

// startNet sets up a fleet per mode and starts its callers; deadline bounds each call.
func startNet(t *testing.T, admin *ledger.Client, clusterID uint64, addresses []string, deadline time.Duration, opts ...ledger.Option) *netRun {
	t.Helper()
	r := &netRun{t: t, admin: admin, stop: make(chan struct{})}
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
		problems := auditFleet(r.admin, &nf.f, nf.answers, netAllowance)
		fig := figures(what, nf, problems)
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

// netFigures are what a run measured, for one mode.
type netFigures struct {
	What, Mode                                           string
	Calls, Answered, Admitted, Retried, Over, Lost, Late int
	Twice                                                int // recorded more often than answered
	PaidAfterRetry                                       int // payments answered paid after a retry by ID
	Worst                                                time.Duration
}

func (f netFigures) String() string {
	return fmt.Sprintf("%s, %s: %d calls, %d answered, %d admitted, %d retried by ID (%d of them paid); over %d, lost %d, twice %d, past deadline %d; worst call %v",
		f.What, f.Mode, f.Calls, f.Answered, f.Admitted, f.Retried, f.PaidAfterRetry, f.Over, f.Lost, f.Twice, f.Late, f.Worst.Round(time.Millisecond))
}

// figures counts a fleet's answers and sorts the audit's problems: over a limit, an
// admission or payment lost, one counted twice, and calls past their deadline.
func figures(what string, nf *netFleet, problems []string) netFigures {
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
		if a.Slowest > nf.f.Deadline+netAllowance {
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
			fig.Twice++
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
