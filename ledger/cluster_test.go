package ledger_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/testenv"
)

// The cluster fault suite: worker processes share a 3-replica cluster and
// make decisions, payments and reservations under request IDs, retrying
// with short deadlines, while replicas are killed with SIGKILL in turn and
// the whole cluster is killed and restarted. Afterwards the parent audits
// what the cluster recorded against what the workers were answered
// (auditFleet). The audit itself runs in CI on the embedded engine, with
// violations injected (TestClusterAuditOnEmbedded).

// fleet is what a run shares: the cluster, its resources and users, and
// what every worker is told.
type fleet struct {
	Addresses []string        `json:"addresses"` // none: the workers are goroutines
	ClusterID uint64          `json:"cluster_id"`
	Req       ledger.Resource `json:"req"`   // lazy requests with a short window
	Money     ledger.Resource `json:"money"` // a money limit, users provisioned and funded
	Users     []string        `json:"users"`
	Funds     uint64          `json:"funds"` // each user's funds at the start
	Deadline  time.Duration   `json:"deadline"`
	GiveUp    time.Duration   `json:"give_up"` // how long a request is retried before it is left unanswered
	Calls     int             `json:"calls"`   // calls per worker; 0: until told to stop
	// Worker and Out are the worker's own: its number and the file its
	// answers go to.
	Worker int    `json:"worker"`
	Out    string `json:"out"`
}

// clusterCall is one request a worker makes.
type clusterCall struct {
	Worker, Seq int
	Kind        int // 0 acquire, 1 a chain of a request and a money hold, 2 payment, 3 reservation then cancel
	User, To    string
	Amount      uint64
	Named       bool // under an ID from the start; else retried under the ID its first attempt got
}

// clusterAnswer is the final answer to a call, and how it went.
type clusterAnswer struct {
	clusterCall
	ID       string        // the request's name ("" if never learnt)
	Answered bool          // an answer came (else it was left unanswered after GiveUp)
	Allowed  bool          // the answer
	At       time.Time     // when it came
	Tries    int           // calls made
	Slowest  time.Duration // the slowest of them
	Err      string        // an error that is not ErrUnavailable
}

func (f *fleet) setup(t testing.TB, c *ledger.Client, b *testenv.Backend, users int) {
	t.Helper()
	f.Req = ledger.Resource{Name: "req", Ledger: b.NewLedger(), Kind: ledger.KindRequests, Window: 2 * time.Second, DefaultLimit: 20, Lazy: true}
	f.Money = ledger.Resource{Name: "usd", Ledger: b.NewLedger(), Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 300, Currency: b.NewLedger()}
	f.Funds = 10_000
	for i := range users {
		f.Users = append(f.Users, fmt.Sprintf("u%d", i))
	}
	f.provision(t, c)
}

// provision creates f's resources and its users on money, funded.
func (f *fleet) provision(t testing.TB, c *ledger.Client) {
	t.Helper()
	for _, r := range []ledger.Resource{f.Req, f.Money} {
		if err := c.CreateResource(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range f.Users {
		if err := c.Provision(ctx, f.Money, ledger.UserLimit{Key: u, Limit: f.Money.DefaultLimit}); err != nil {
			t.Fatal(err)
		}
		if err := c.Fund(ctx, f.Money.Currency, ledger.Request{User: u, Amount: f.Funds}); err != nil {
			t.Fatal(err)
		}
	}
}

// work makes calls on c until stop is closed or f.Calls are made, and
// writes each final answer to out as a line of JSON.
func (f *fleet) work(c *ledger.Client, stop <-chan struct{}, out io.Writer) error {
	rng := rand.New(rand.NewPCG(uint64(f.Worker), uint64(f.Req.Ledger)))
	enc := json.NewEncoder(out)
	for seq := 0; f.Calls == 0 || seq < f.Calls; seq++ {
		select {
		case <-stop:
			return nil
		default:
		}
		from := rng.IntN(len(f.Users))
		k := clusterCall{Worker: f.Worker, Seq: seq, Kind: rng.IntN(4), User: f.Users[from],
			To: f.Users[(from+1)%len(f.Users)], Amount: 1 + rng.Uint64N(3), Named: rng.IntN(2) == 0}
		// A chain's later holds lose the name of an unnamed request sent
		// again (TestHistoryChainAfterAnAgain): chains go named.
		k.Named = k.Named || k.Kind == 1
		if err := enc.Encode(f.make(c, k)); err != nil {
			return err
		}
	}
	return nil
}

// make makes call k until it is answered, retrying the same request (by
// its ID) after every ErrUnavailable, for at most f.GiveUp.
func (f *fleet) make(c *ledger.Client, k clusterCall) clusterAnswer {
	a := clusterAnswer{clusterCall: k}
	var id ledger.ID
	if k.Named {
		id = ledger.KeyID(fmt.Sprintf("cluster/%d/%d/%d", f.Req.Ledger, k.Worker, k.Seq))
	}
	begin := time.Now()
	for {
		a.Tries++
		allowed, name, took, err := f.try(c, k, id)
		a.Slowest = max(a.Slowest, took)
		if id.IsZero() {
			id = name // retry the first attempt, not a new one
		}
		switch {
		case err == nil:
			a.Answered, a.Allowed, a.At = true, allowed, time.Now()
		case !errors.Is(err, ledger.ErrUnavailable):
			a.Err = err.Error()
		case time.Since(begin) < f.GiveUp:
			// Without an attempt ID (the call failed before it made one)
			// the retry is a new attempt; were anything applied under a
			// name never learnt, the audit would find it unclaimed.
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if !id.IsZero() {
			a.ID = id.String()
		}
		return a
	}
}

// try makes one call of k under id (zero: a new request) within f.Deadline,
// and returns the answer, the request's name and how long the call took. A
// reservation's cancel is retried within try, each call within the
// deadline.
func (f *fleet) try(c *ledger.Client, k clusterCall, id ledger.ID) (allowed bool, name ledger.ID, took time.Duration, err error) {
	call := func(do func(ctx context.Context) error) error {
		cctx, cancel := context.WithTimeout(context.Background(), f.Deadline)
		defer cancel()
		start := time.Now()
		err := do(cctx)
		took = max(took, time.Since(start))
		return err
	}
	req := ledger.Request{User: k.User, Amount: k.Amount, ID: id}
	var d ledger.Decision
	var rv *ledger.Reservation
	err = call(func(ctx context.Context) error {
		var err error
		switch k.Kind {
		case 0:
			d, err = c.Acquire(ctx, f.Req, req)
		case 1:
			var ds []ledger.Decision
			ds, err = c.AcquireAll(ctx, []ledger.Part{{Resource: f.Req, Request: req}, {Resource: f.Money, Request: ledger.Request{User: k.User, Amount: k.Amount}}})
			if len(ds) > 0 {
				d = ds[0]
			}
		case 2:
			d, err = c.Pay(ctx, f.Money, ledger.Payment{From: k.User, To: k.To, Amount: k.Amount, ID: id})
		default:
			rv, err = c.Reserve(ctx, f.Req, req)
			if rv != nil {
				d = rv.Decision()
			}
		}
		return err
	})
	name = d.ID
	if n, ok := ledger.AttemptID(err); ok {
		name = n
	}
	if err != nil || rv == nil || !rv.OK() {
		return d.Allowed, name, took, err
	}
	for end := time.Now().Add(f.GiveUp); ; {
		cerr := call(rv.Cancel)
		if cerr == nil || !errors.Is(cerr, ledger.ErrUnavailable) || time.Now().After(end) {
			return true, name, took, cerr
		}
	}
}

// auditFleet checks what the cluster recorded against the answers, and
// returns every problem found: a user over its limit in a window or in
// flight (Client.Audit); a request answered admitted that is not recorded
// exactly once, one answered denied that is recorded, one left unanswered
// that is recorded more than once, an admission no worker asked for; a
// payment not made exactly once when answered paid, or made when answered
// denied; funds that do not add up to the payments recorded; a call that
// outlasted its deadline by more than noise; and any unexpected error.
func auditFleet(c *ledger.Client, f *fleet, answers []clusterAnswer, noise time.Duration) []string {
	var problems []string
	problemf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	recorded := map[uint32]map[string]int{}                    // ledger -> request name -> admissions
	payments := map[string][]*ledger.Paid{}                    // request name -> payments
	paid, received := map[string]uint64{}, map[string]uint64{} // user -> amounts
	for _, r := range []ledger.Resource{f.Req, f.Money} {
		recorded[r.Ledger] = map[string]int{}
		users, err := c.Users(ctx, r)
		if err != nil {
			return []string{err.Error()}
		}
		for _, u := range users {
			a, err := c.Audit(ctx, r, u.Key, time.Time{}, time.Time{})
			if err != nil {
				return []string{err.Error()}
			}
			if !a.OK() {
				problemf("%s on %s: %d units taken in a window from %v, %d in flight at once; limit %d", u.Key, r.Name, a.MostInWindow, a.WindowStart, a.MostInFlight, a.Limit)
			}
			h, err := c.History(ctx, r, u.Key, time.Time{}, time.Time{}, 0)
			if err != nil {
				return []string{err.Error()}
			}
			for _, adm := range h {
				recorded[r.Ledger][adm.ID.String()]++
				if p := adm.Payment; p != nil {
					payments[adm.ID.String()] = append(payments[adm.ID.String()], p)
					paid[u.Key] += p.Amount
					received[p.ToKey] += p.Amount
				}
			}
		}
	}
	asked := map[string]bool{}
	for _, a := range answers {
		asked[a.ID] = true
		problems = append(problems, checkAnswer(f, a, recorded, payments, noise)...)
	}
	for l, ids := range recorded {
		for id := range ids {
			if !asked[id] {
				problemf("admission %s on ledger %d: recorded, but no worker's request has that name", id, l)
			}
		}
	}
	for _, u := range f.Users {
		funds, err := c.Funds(ctx, f.Money.Currency, u)
		if err != nil {
			return append(problems, err.Error())
		}
		if want := f.Funds - paid[u] + received[u]; funds != want {
			problemf("%s holds %d, but started with %d, paid %d and was paid %d in the payments recorded with reservations", u, funds, f.Funds, paid[u], received[u])
		}
	}
	sort.Strings(problems)
	return problems
}

// checkAnswer checks one answer against what was recorded under its name.
func checkAnswer(f *fleet, a clusterAnswer, recorded map[uint32]map[string]int, payments map[string][]*ledger.Paid, noise time.Duration) []string {
	var problems []string
	problemf := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("worker %d call %d (kind %d, %s): ", a.Worker, a.Seq, a.Kind, a.ID)+fmt.Sprintf(format, args...))
	}
	if a.Err != "" {
		problemf("error: %s", a.Err)
	}
	if a.Slowest > f.Deadline+noise {
		problemf("a call took %v with a deadline of %v", a.Slowest, f.Deadline)
	}
	if a.ID == "" {
		return problems
	}
	ledgers := map[int][]uint32{0: {f.Req.Ledger}, 1: {f.Req.Ledger, f.Money.Ledger}, 2: {f.Money.Ledger}, 3: {f.Req.Ledger}}[a.Kind]
	for _, l := range ledgers {
		switch n := recorded[l][a.ID]; {
		case a.Answered && a.Allowed && n != 1:
			problemf("answered admitted, recorded %d times on ledger %d", n, l)
		case a.Answered && !a.Allowed && n != 0:
			problemf("answered denied, recorded %d times on ledger %d", n, l)
		case !a.Answered && n > 1:
			problemf("left unanswered, recorded %d times on ledger %d", n, l)
		}
	}
	if a.Kind != 2 {
		return problems
	}
	ps := payments[a.ID]
	switch {
	case a.Answered && a.Allowed && (len(ps) != 1 || ps[0].Amount != a.Amount || ps[0].ToKey != a.To):
		problemf("answered paid (%d to %s), payments recorded: %v", a.Amount, a.To, ps)
	case a.Answered && !a.Allowed && len(ps) != 0:
		problemf("answered denied, payments recorded: %v", ps)
	case !a.Answered && len(ps) > 1:
		problemf("left unanswered, payments recorded: %v", ps)
	}
	return problems
}

// envClusterWorker names the fleet file of a worker process.
const envClusterWorker = "TBLIMIT_CLUSTER_WORKER"

// TestClusterWorker is a worker process of TestClusterFaults: it makes
// calls on the cluster until its standard input closes.
func TestClusterWorker(t *testing.T) {
	path := os.Getenv(envClusterWorker)
	if path == "" {
		t.Skip("a worker process of TestClusterFaults: runs only when started by it")
	}
	var f fleet
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var c *ledger.Client
	if len(f.Addresses) == 0 { // alone, on an engine of its own (TestClusterWorkerProcesses)
		c = ledger.New(embedded.New())
		f.provision(t, c)
	} else if c, err = ledger.Dial(f.ClusterID, f.Addresses); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := os.Create(f.Out)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	if err := f.work(c, stop, out); err != nil {
		t.Fatal(err)
	}
}

// worker is a worker process.
type worker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   string
	log   string
	done  chan error
}

func startWorker(t *testing.T, f fleet, dir string) *worker {
	t.Helper()
	f.Out = filepath.Join(dir, fmt.Sprintf("answers-%d.jsonl", f.Worker))
	spec := filepath.Join(dir, fmt.Sprintf("worker-%d.json", f.Worker))
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, b, 0o600); err != nil {
		t.Fatal(err)
	}
	w := &worker{out: f.Out, log: filepath.Join(dir, fmt.Sprintf("worker-%d.log", f.Worker)), done: make(chan error, 1)}
	logFile, err := os.Create(w.log)
	if err != nil {
		t.Fatal(err)
	}
	w.cmd = exec.Command(os.Args[0], "-test.run=^TestClusterWorker$", "-test.v", "-test.count=1")
	w.cmd.Env = append(os.Environ(), envClusterWorker+"="+spec)
	w.cmd.Stdout, w.cmd.Stderr = logFile, logFile
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- w.cmd.Wait(); logFile.Close() }()
	t.Cleanup(func() { // a worker left running by a failed test
		_ = w.cmd.Process.Kill()
		<-w.done
		w.done <- nil
	})
	return w
}

// stop tells the worker to finish its call and waits for it, at most
// limit; it returns the worker's answers.
func (w *worker) stop(t *testing.T, limit time.Duration) []clusterAnswer {
	t.Helper()
	w.stdin.Close()
	select {
	case err := <-w.done:
		w.done <- err
		if err != nil {
			log, _ := os.ReadFile(w.log)
			t.Fatalf("worker %s: %v; its output:\n%s", w.out, err, log)
		}
	case <-time.After(limit):
		t.Fatalf("worker %s did not stop within %v", w.out, limit)
	}
	return readAnswers(t, w.out)
}

func readAnswers(t *testing.T, path string) []clusterAnswer {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var out []clusterAnswer
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		var a clusterAnswer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Worker processes take decisions, payments and reservations on a
// 3-replica cluster while each replica in turn is killed with SIGKILL and
// restarted (every replica, so the primary of the moment too), and while
// the whole cluster is killed and restarted. Then the cluster's record is
// audited against the workers' answers (auditFleet).
func TestClusterFaults(t *testing.T) {
	cl := testenv.StartCluster(t, 3)
	// The parent waits for the cluster as long as it takes to come back.
	c := ledger.New(cl.Client(t), ledger.WithTimeout(2*time.Minute))
	f := fleet{Addresses: cl.Addresses, ClusterID: cl.ClusterID, Deadline: 500 * time.Millisecond, GiveUp: time.Minute}
	f.setup(t, c, &testenv.Backend{Real: true}, 6)
	dir := t.TempDir()
	var workers []*worker
	for i := range 4 {
		w := f
		w.Worker = i
		workers = append(workers, startWorker(t, w, dir))
	}
	pause := func(d time.Duration) { time.Sleep(d) }
	restartCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 2*time.Minute)
	}
	pause(2 * time.Second)
	for i := range cl.Replicas() {
		t.Logf("killing replica %d", i)
		if err := cl.KillReplica(i); err != nil {
			t.Fatal(err)
		}
		pause(2 * time.Second)
		rctx, cancel := restartCtx()
		err := cl.RestartReplica(rctx, i)
		cancel()
		if err != nil {
			t.Fatalf("restart of replica %d: %v", i, err)
		}
		pause(3 * time.Second) // let it catch up before the next one goes
	}
	t.Log("killing the whole cluster")
	if err := cl.Kill(); err != nil {
		t.Logf("kill: %v", err)
	}
	pause(time.Second)
	rctx, cancel := restartCtx()
	err := cl.Restart(rctx)
	cancel()
	if err != nil {
		t.Fatalf("restart of the cluster: %v", err)
	}
	restarted := time.Now()
	pause(3 * time.Second)
	var answers []clusterAnswer
	for _, w := range workers {
		answers = append(answers, w.stop(t, f.GiveUp+time.Minute)...)
	}
	checkWorkersAnswered(t, answers, len(workers), restarted)
	if problems := auditFleet(c, &f, answers, 500*time.Millisecond); len(problems) > 0 {
		t.Fatalf("%d problems in what the cluster recorded:\n%s", len(problems), joinLines(problems, 50))
	}
}

// The worker processes of TestClusterFaults start, answer, write their
// answers and stop when told: here each alone, on an engine of its own.
func TestClusterWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts processes")
	}
	f := fleet{Deadline: time.Second, GiveUp: 10 * time.Second}
	f.setup(t, ledger.New(embedded.New()), &testenv.Backend{}, 3)
	dir := t.TempDir()
	var workers []*worker
	for i := range 2 {
		w := f
		w.Worker = i
		workers = append(workers, startWorker(t, w, dir))
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, w := range workers {
		for fileLines(w.out) < 10 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	var answers []clusterAnswer
	for _, w := range workers {
		answers = append(answers, w.stop(t, time.Minute)...)
	}
	checkWorkersAnswered(t, answers, 2, time.Time{})
	for _, a := range answers {
		if !a.Answered || a.Err != "" || (a.Allowed && a.ID == "") {
			t.Fatalf("answer %+v", a)
		}
	}
}

func fileLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

// checkWorkersAnswered fails unless every worker got answers, some of them
// after since: a suite in which the cluster never answered again proves
// nothing.
func checkWorkersAnswered(t *testing.T, answers []clusterAnswer, workers int, since time.Time) {
	t.Helper()
	total, after := make([]int, workers), make([]int, workers)
	admitted := 0
	for _, a := range answers {
		if a.Answered {
			total[a.Worker]++
			if a.At.After(since) {
				after[a.Worker]++
			}
			if a.Allowed {
				admitted++
			}
		}
	}
	t.Logf("%d calls, %d admitted; answered per worker %v, after the cluster's restart %v", len(answers), admitted, total, after)
	for i := range workers {
		if total[i] < 10 || after[i] == 0 {
			t.Fatalf("worker %d: %d calls answered, %d after the cluster restarted; want at least 10, and some after", i, total[i], after[i])
		}
	}
}

func joinLines(lines []string, max int) string {
	s := ""
	for i, l := range lines {
		if i == max {
			return s + fmt.Sprintf("... and %d more\n", len(lines)-max)
		}
		s += l + "\n"
	}
	return s
}

// The audit of the cluster suite, on the embedded engine: workers as
// goroutines (each its own Client, as a process would be) behind a network
// that loses requests and replies, duplicates and delays them. The audit
// finds nothing; then violations are injected, one of each kind, and it
// must report each.
func TestClusterAuditOnEmbedded(t *testing.T) {
	clock := embedded.NewManualClock(time.Now())
	engine := embedded.New(embedded.WithClock(clock))
	t.Cleanup(engine.Close)
	b := &testenv.Backend{Client: engine}
	sim := simnet.New(engine, quick, simnet.WithSeed(17))
	t.Cleanup(sim.Close)
	f := fleet{Deadline: 150 * time.Millisecond, GiveUp: 30 * time.Second, Calls: 40}
	f.setup(t, ledger.New(engine), b, 6)
	late := testenv.WatchLateness(t)
	sim.SetFaults(simnet.Faults{DropRequest: 0.05, DropReply: 0.08, Duplicate: 0.15, Delay: 5 * time.Millisecond, Hold: 50 * time.Millisecond})
	var mu sync.Mutex
	var answers []clusterAnswer
	var wg sync.WaitGroup
	for i := range 6 {
		w := f
		w.Worker = i
		wg.Go(func() {
			pr, pw := io.Pipe()
			go func() {
				err := w.work(ledger.New(sim), nil, pw)
				pw.CloseWithError(err)
			}()
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				var a clusterAnswer
				if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
					t.Error(err)
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			}
			if err := sc.Err(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	sim.SetFaults(simnet.Faults{})
	checkWorkersAnswered(t, answers, 6, time.Time{})
	c := ledger.New(engine)
	noise := late.Allowance(250 * time.Millisecond) // scheduling on a busy 2-core machine, -race
	if problems := auditFleet(c, &f, answers, noise); len(problems) > 0 {
		t.Fatalf("%d problems on a cluster that kept its promises:\n%s", len(problems), joinLines(problems, 50))
	}
	want := injectViolations(t, engine, clock, c, &f, answers)
	problems := auditFleet(c, &f, answers, noise)
	for _, w := range want {
		found := false
		for _, p := range problems {
			found = found || containsAll(p, w...)
		}
		if !found {
			t.Errorf("the audit did not report %q; it reported:\n%s", w, joinLines(problems, 50))
		}
	}
}

// injectViolations breaks each promise once, on the engine behind the
// fleet's back or in the answers, and returns what the audit must say
// about each (words of one problem).
func injectViolations(t *testing.T, engine tb.Client, clock *embedded.ManualClock, c *ledger.Client, f *fleet, answers []clusterAnswer) [][]string {
	t.Helper()
	var want [][]string
	create := func(tr tb.Transfer) {
		t.Helper()
		res, err := engine.CreateTransfers([]tb.Transfer{tr})
		if err != nil || res[0].Status != tb.TransferCreated {
			t.Fatalf("injecting %+v: %v, %v", tr, res, err)
		}
	}
	find := func(ok func(a clusterAnswer) bool) *clusterAnswer {
		for i := range answers {
			if ok(answers[i]) {
				return &answers[i]
			}
		}
		t.Fatal("no answer to inject a violation into")
		return nil
	}
	// Over the limit: another program holds a user's units for a second
	// instead of a window, and then the user takes the whole limit again.
	if err := c.Provision(ctx, f.Req, ledger.UserLimit{Key: "intruder", Limit: 5}); err != nil {
		t.Fatal(err)
	}
	create(tb.Transfer{ID: tb.ID(), DebitAccountID: tb.BytesToUint128(ledger.UserID(f.Req.Ledger, "intruder")),
		CreditAccountID: tb.BytesToUint128(ledger.OperatorID(f.Req.Ledger)), Amount: tb.ToUint128(5), Timeout: 1,
		Ledger: f.Req.Ledger, Code: 10, Flags: tb.TransferFlags{Pending: true}.ToUint16()})
	clock.Advance(1100 * time.Millisecond)
	d, err := c.Acquire(ctx, f.Req, ledger.Request{User: "intruder", Amount: 5})
	if err != nil || !d.Allowed {
		t.Fatalf("Acquire after the short hold = %+v, %v", d, err)
	}
	want = append(want, []string{"intruder on req: 10 units taken in a window"}, []string{d.ID.String(), "no worker's request has that name"})
	// Recorded twice: one more hold under an admitted request's name.
	twice := find(func(a clusterAnswer) bool { return a.Answered && a.Allowed && a.Kind == 0 })
	id, _ := ledger.ParseID(twice.ID)
	create(tb.Transfer{ID: tb.ID(), DebitAccountID: tb.BytesToUint128(ledger.UserID(f.Req.Ledger, twice.User)),
		CreditAccountID: tb.BytesToUint128(ledger.OperatorID(f.Req.Ledger)), Amount: tb.ToUint128(0), Timeout: 1,
		UserData128: tb.BytesToUint128(id), Ledger: f.Req.Ledger, Code: 10, Flags: tb.TransferFlags{Pending: true}.ToUint16()})
	want = append(want, []string{twice.ID, "answered admitted, recorded 2 times"})
	// Answered admitted, but not recorded: a denial reported as an admission.
	denied := find(func(a clusterAnswer) bool { return a.Answered && !a.Allowed && a.Kind == 0 && a.ID != "" })
	denied.Allowed = true
	want = append(want, []string{denied.ID, "answered admitted, recorded 0 times"})
	// Money moved outside a reservation: a payment of a paid request made
	// again without its limit.
	payment := find(func(a clusterAnswer) bool { return a.Answered && a.Allowed && a.Kind == 2 })
	create(tb.Transfer{ID: tb.ID(), DebitAccountID: tb.BytesToUint128(ledger.CurrencyUserID(f.Money.Currency, payment.User)),
		CreditAccountID: tb.BytesToUint128(ledger.CurrencyUserID(f.Money.Currency, payment.To)), Amount: tb.ToUint128(payment.Amount),
		Ledger: f.Money.Currency, Code: 21})
	want = append(want, []string{payment.User + " holds", "in the payments recorded with reservations"})
	// A call that outlasted its deadline.
	late := &answers[len(answers)-1]
	late.Slowest = f.Deadline + time.Second
	want = append(want, []string{fmt.Sprintf("call %d", late.Seq), "a call took 1.15s with a deadline of 150ms"})
	return want
}

func containsAll(s string, words ...string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}
