package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/service/api"
	"github.com/tblimit/tblimit/service/ratelimit"
)

// The rows of tblimit.v1, tblimit's own API (package api), as tblimit serve
// --api serves it: beside Envoy's protocol on the server of a serve row
// (serveOn), asked through the generated client over the cell's one shared
// grpc.ClientConn. "tblimit api/<engine>" asks Acquire of one unit of the
// rule's resource (the resource the serve row's ShouldRateLimit decides on),
// with no request ID, as the in-process row's Allow. "tblimit pay/<engine>"
// is ledger.Client.Pay called in process, and "tblimit api pay/<engine>" the
// same payment over the API: each decision pays 1 from the key to one payee,
// under a request ID of its own, on a money resource whose limit per key is
// the workload's. The pay rows run on the warm workloads only: a money
// resource is never lazy, and each payer is funded before the clock starts.
// All run only when named (-contenders; scripts/bench.sh --api names them).
const (
	apiEmbeddedName    = "tblimit api/embedded"
	apiTBName          = "tblimit api/tigerbeetle"
	payEmbeddedName    = "tblimit pay/embedded"
	payTBName          = "tblimit pay/tigerbeetle"
	apiPayEmbeddedName = "tblimit api pay/embedded"
	apiPayTBName       = "tblimit api pay/tigerbeetle"
)

// payee is the user every payment of the pay rows pays: one merchant.
const payee = "shop"

// apiPairs are the ratios the report computes for the API rows: Acquire
// over the API against the recipe in process and against ShouldRateLimit on
// the same engine, and Pay over the API against Pay in process.
func apiPairs() [][2]string {
	return [][2]string{
		{apiEmbeddedName, "tblimit/embedded"},
		{apiEmbeddedName, serveRows[0].name},
		{apiTBName, "tblimit/tigerbeetle"},
		{apiTBName, serveRows[2].name},
		{apiPayEmbeddedName, payEmbeddedName},
		{apiPayTBName, payTBName},
	}
}

// apiContenders are the API rows and the in-process pay rows, on the
// embedded engine (fresh per cell) and on the shared real server (srv; one
// client per row for the run; tbNotRun says why there is none). The
// returned function closes the real server's clients.
func apiContenders(window time.Duration, srv func() (*server, error), tbNotRun string) ([]*contender, func()) {
	unit, ok := envoyUnit(window)
	notRun := ""
	if !ok {
		notRun = fmt.Sprintf("the window %v is no whole Envoy unit (second, minute, hour, day, week...)", window)
	}
	get, closeAll := clientsOf(srv)
	acquire := func(ctx context.Context, lc *ledger.Client, c cell) (*instance, error) {
		return apiAcquireSetup(ctx, lc, unit, c)
	}
	apiPay := func(ctx context.Context, lc *ledger.Client, c cell) (*instance, error) {
		return apiPaySetup(ctx, lc, unit, c)
	}
	// The API is served as the serve rows are: where the window is a whole
	// Envoy unit. The pay rows need what only the warm workloads provision.
	pay := func(c *contender) *contender {
		c.warmOnly = true
		return c
	}
	rows := []*contender{
		onEngine(apiEmbeddedName, notRun, nil, acquire),
		pay(onEngine(payEmbeddedName, "", nil, paySetup)),
		pay(onEngine(apiPayEmbeddedName, notRun, nil, apiPay)),
		onEngine(apiTBName, cmp.Or(tbNotRun, notRun), get, acquire),
		pay(onEngine(payTBName, tbNotRun, get, paySetup)),
		pay(onEngine(apiPayTBName, cmp.Or(tbNotRun, notRun), get, apiPay)),
	}
	return rows, closeAll
}

// onEngine is a row whose setup runs on a ledger.Client: on a fresh
// embedded engine per cell when get is nil, else on the real server's
// client that get gives for the row (shared by its cells).
func onEngine(name, notRun string, get func(string) (*countingClient, error),
	setup func(ctx context.Context, lc *ledger.Client, c cell) (*instance, error)) *contender {
	c := &contender{name: name, semantics: slidingLog, notRun: notRun, onlyNamed: true}
	if get == nil {
		c.inProcess = true
		c.setup = func(ctx context.Context, cl cell) (*instance, error) {
			e := embedded.New()
			inst, err := setup(ctx, ledger.New(e), cl)
			if err != nil {
				e.Close()
				return nil, err
			}
			inst.ops = func() map[string]opCount { return engineOps(e.Stats()) }
			stop := inst.close
			inst.close = func() {
				if stop != nil {
					stop()
				}
				e.Close()
			}
			return inst, nil
		}
		return c
	}
	c.shared = true
	c.setup = func(ctx context.Context, cl cell) (*instance, error) {
		tc, err := get(name)
		if err != nil {
			return nil, err
		}
		// ledger.New on a client it did not dial: the cell leaves it open.
		inst, err := setup(ctx, ledger.New(tc), cl)
		if err != nil {
			return nil, err
		}
		inst.ops = tc.ops
		return inst, nil
	}
	return c
}

// apiAcquireSetup serves tblimit.v1 beside Envoy's protocol for cell c
// (serveOn) and asks Acquire of one unit of the rule's resource per
// decision, for the key's user. The resource is found once before the
// clock starts (a Peek), as a long-running service has it cached.
func apiAcquireSetup(ctx context.Context, lc *ledger.Client, unit ratelimit.TimeUnit, c cell) (*instance, error) {
	if k := c.keys[0]; ratelimit.UserKey([]string{k}) != k {
		// serveOn provisions the rule's users by UserKey; the API is asked
		// by the key as it is.
		return nil, fmt.Errorf("the rule's user of key %q is %q, not the key", k, ratelimit.UserKey([]string{k}))
	}
	s, err := serveOn(ctx, lc, unit, c, api.New(lc).Register)
	if err != nil {
		return nil, err
	}
	lim := tblimitv1.NewLimitServiceClient(s.conn)
	name, keys := s.res.Name, c.keys
	if _, err := lim.Peek(ctx, &tblimitv1.PeekRequest{Resource: name, User: keys[0]}); err != nil && status.Code(err) != codes.NotFound {
		s.close()
		return nil, fmt.Errorf("peek: %w", err)
	}
	return &instance{
		allow: func(ctx context.Context, k int) (bool, error) {
			resp, err := lim.Acquire(ctx, &tblimitv1.AcquireRequest{Resource: name, User: keys[k]})
			if err != nil {
				return false, err
			}
			return resp.GetDecision().GetAllowed(), nil
		},
		clientOps: func() map[string]opCount { return ledgerOps(lc.Stats()) },
		close:     s.close,
	}, nil
}

// paySetup creates the cell's money resource on lc (payResource) and pays
// in process: one ledger.Client.Pay of 1 from the key to the payee per
// decision, under a request ID of its own.
func paySetup(ctx context.Context, lc *ledger.Client, c cell) (*instance, error) {
	r, err := payResource(ctx, lc, c)
	if err != nil {
		return nil, err
	}
	ids := newRequestIDs(c)
	keys := c.keys
	return &instance{
		allow: func(ctx context.Context, k int) (bool, error) {
			d, err := lc.Pay(ctx, r, ledger.Payment{From: keys[k], To: payee, Amount: 1, ID: ledger.KeyID(ids.next())})
			return d.Allowed, err
		},
		clientOps: func() map[string]opCount { return ledgerOps(lc.Stats()) },
	}, nil
}

// apiPaySetup is paySetup over the API: tblimit.v1 served beside Envoy's
// protocol (serveOn), one Pay per decision by the generated client, the
// request ID as a string (the service derives the ledger ID from it, as
// paySetup does). The resource is found once before the clock starts.
func apiPaySetup(ctx context.Context, lc *ledger.Client, unit ratelimit.TimeUnit, c cell) (*instance, error) {
	r, err := payResource(ctx, lc, c)
	if err != nil {
		return nil, err
	}
	s, err := serveOn(ctx, lc, unit, c, api.New(lc).Register)
	if err != nil {
		return nil, err
	}
	lim := tblimitv1.NewLimitServiceClient(s.conn)
	if _, err := lim.Funds(ctx, &tblimitv1.FundsRequest{Resource: r.Name, User: payee}); err != nil {
		s.close()
		return nil, fmt.Errorf("funds: %w", err)
	}
	ids := newRequestIDs(c)
	keys := c.keys
	return &instance{
		allow: func(ctx context.Context, k int) (bool, error) {
			resp, err := lim.Pay(ctx, &tblimitv1.PayRequest{Resource: r.Name, From: keys[k], To: payee, Amount: 1, RequestId: ids.next()})
			if err != nil {
				return false, err
			}
			return resp.GetDecision().GetAllowed(), nil
		},
		clientOps: func() map[string]opCount { return ledgerOps(lc.Stats()) },
		close:     s.close,
	}, nil
}

// payResource creates the money resource of cell c on lc, on ledgers of
// the cell's own (cellLedger: the limit, and the currency after it), named
// after the cell so that the API finds it by name on a shared server;
// provisions the cell's keys (limit: the workload's) and the payee; and
// funds every key with twice its limit, so that the limit, not the funds,
// is what denies.
func payResource(ctx context.Context, lc *ledger.Client, c cell) (ledger.Resource, error) {
	if c.w.arrivals() {
		return ledger.Resource{}, fmt.Errorf("workload %s: a money resource is never lazy", c.w.name)
	}
	r := ledger.Resource{Name: fmt.Sprintf("pay%d", c.id), Ledger: cellLedger(c, 0), Kind: ledger.KindMoney,
		Window: c.window, DefaultLimit: c.w.limit, Currency: cellLedger(c, 1)}
	if err := lc.CreateResource(ctx, r); err != nil {
		return r, err
	}
	users := make([]ledger.UserLimit, 0, c.w.users+1)
	for _, k := range c.keys[:c.w.users] {
		users = append(users, ledger.UserLimit{Key: k, Limit: c.w.limit})
	}
	users = append(users, ledger.UserLimit{Key: payee, Limit: c.w.limit})
	if err := lc.Provision(ctx, r, users...); err != nil {
		return r, fmt.Errorf("provision %d users: %w", len(users), err)
	}
	return r, fundAll(ctx, lc, r.Currency, c.keys[:c.w.users], 2*c.w.limit)
}

// fundAll funds every key with amount on currency, by 64 calls at a time
// (a real server's client merges them into requests).
func fundAll(ctx context.Context, lc *ledger.Client, currency uint32, keys []string, amount uint64) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range min(64, len(keys)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(keys)); i = next.Add(1) - 1 {
				if err := lc.Fund(ctx, currency, ledger.Request{User: keys[i], Amount: amount}); err != nil {
					errs <- fmt.Errorf("fund %s: %w", keys[i], err)
					next.Store(int64(len(keys))) // the others stop
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs // the first, or nil
}

// requestIDs names the payments of one cell: "p<cell>-<n>", n counted up
// from 1, unique in the run (on a shared server too).
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs(c cell) *requestIDs { return &requestIDs{prefix: fmt.Sprintf("p%d-", c.id)} }

func (r *requestIDs) next() string { return r.prefix + strconv.FormatUint(r.n.Add(1), 10) }

// apiText says, for every cell with an API row, its decisions/s over its
// baselines of the same run.
func (rep *report) apiText(w io.Writer) {
	var lines []string
	for _, q := range rep.Ratios {
		if strings.HasPrefix(q.Tblimit, "tblimit api ") || strings.HasPrefix(q.Tblimit, "tblimit api/") {
			lines = append(lines, fmt.Sprintf("  %s, %d callers: %s ÷ %s = %.3g", q.Workload, q.Callers, q.Tblimit, q.Peer, q.Ratio))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\ntblimit.v1 (tblimit serve --api over loopback gRPC, the generated client): decisions/s")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w, `api rows: served beside Envoy's protocol on the serve row's server, callers sharing one
  grpc.ClientConn. tblimit api/<engine>: one Acquire of one unit per decision, on the resource of
  the serve row's rule, no request ID; ÷ tblimit/<engine> is over the recipe's Allow in process,
  ÷ tblimit serve/<engine> over ShouldRateLimit. tblimit api pay/<engine>: one Pay of 1 from the
  key to one payee per decision, each under a request ID of its own; ÷ tblimit pay/<engine> is
  over ledger.Client.Pay in process with the same request IDs.`)
}
