package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/service/api"
	"github.com/tblimit/tblimit/service/ratelimit"
)

// The costs set: an AI gateway's traffic, whose cost (tokens) is known only
// after each call. 32 callers on one user with a budget of 20,000 tokens a
// second; each call is checked before, lasts 20 ms, uses 200 to 2,000
// tokens, and is charged after. A denied check is followed by the next
// request 1 ms later. Each row runs for the cell's time, more than a few
// windows, on a fresh engine (or ledger) of its own.
const (
	costBudget    = 20_000
	costCallers   = 32
	costMaxTokens = 2_000
	costMinTokens = 200
	costCallTime  = 20 * time.Millisecond
	costUser      = "alice"
)

// costClient is what one row asks: a check before a call (id names the
// call), and the charge of its tokens after it.
type costClient interface {
	check(ctx context.Context, id string) (bool, error)
	charge(ctx context.Context, id string, tokens uint64) error
}

// costRow is one row: open makes its client on a fresh state, with what
// reads the record's most units in any window (nil where there is none).
type costRow struct {
	name   string
	notRun string
	open   func(ctx context.Context) (c costClient, record func() (uint64, error), close func(), err error)
}

// costResult is a row's figures.
type costResult struct {
	Name         string  `json:"name"`
	NotRun       string  `json:"not_run,omitempty"`
	Err          string  `json:"error,omitempty"`
	Calls        int     `json:"calls"`
	Errors       int     `json:"errors"`
	Decisions    float64 `json:"decisions_per_second"`
	WorstAligned float64 `json:"worst_aligned_window_over_budget"`
	WorstSliding float64 `json:"worst_sliding_window_over_budget"`
	Record       float64 `json:"record_worst_window_over_budget,omitempty"`
	Used         float64 `json:"used_over_budget"`
}

type costCall struct {
	at     time.Duration
	tokens uint64
}

// runCosts runs the costs set and writes costs.txt and costs.json to out.
func runCosts(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	d := 8 * time.Second
	if cfg.MaxTime != 5*time.Second { // set by -max-time (5 s is its default)
		d = cfg.MaxTime
	}
	rows, stop := costRows(cfg)
	defer stop()
	var out []costResult
	for _, r := range rows {
		if len(cfg.Only) > 0 && !slices.Contains(cfg.Only, r.name) {
			continue
		}
		fmt.Fprintf(stderr, "costs: %s\n", r.name)
		out = append(out, runCostRow(ctx, r, d))
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(struct {
		Rev      string       `json:"rev"`
		Seconds  float64      `json:"seconds"`
		Budget   int          `json:"budget_per_second"`
		Callers  int          `json:"callers"`
		Rows     []costResult `json:"rows"`
		Measured time.Time    `json:"measured"`
	}{cfg.Rev, d.Seconds(), costBudget, costCallers, out, time.Now().UTC()}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.Out, "costs.json"), js, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(cfg.Out, "costs.txt"))
	if err != nil {
		return err
	}
	defer f.Close()
	w := io.MultiWriter(stdout, f)
	fmt.Fprintf(w, "Costs known after the call (rev %s): %d callers, one user, a budget of %d tokens a second,\n"+
		"calls of %d-%d tokens lasting %v, checked before and charged after, %v a row.\n"+
		"Windows are of the calls' tokens by when their check was answered; \"record\" is the most units\n"+
		"the cluster's own record held in any window (ledger.Client.Audit).\n\n",
		cfg.Rev, costCallers, costBudget, costMinTokens, costMaxTokens, costCallTime, d)
	fmt.Fprintf(w, "%-44s %8s %8s %8s %8s %8s %7s %6s\n", "row", "aligned", "sliding", "record", "used", "dec/s", "calls", "errors")
	for _, r := range out {
		switch {
		case r.NotRun != "":
			fmt.Fprintf(w, "%-44s not run: %s\n", r.Name, r.NotRun)
		case r.Err != "":
			fmt.Fprintf(w, "%-44s failed: %s\n", r.Name, r.Err)
		default:
			record := "-"
			if r.Record > 0 {
				record = fmt.Sprintf("%.2f×", r.Record)
			}
			fmt.Fprintf(w, "%-44s %7.2f× %7.2f× %8s %7.2f× %8.0f %7d %6d\n", r.Name, r.WorstAligned, r.WorstSliding, record, r.Used, r.Decisions, r.Calls, r.Errors)
		}
	}
	return nil
}

// runCostRow runs one row for d.
func runCostRow(ctx context.Context, r costRow, d time.Duration) costResult {
	res := costResult{Name: r.name, NotRun: r.notRun}
	if r.notRun != "" {
		return res
	}
	c, record, closeRow, err := r.open(ctx)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer closeRow()
	var mu sync.Mutex
	var calls []costCall
	var asks int
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for g := range costCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Since(start) < d && ctx.Err() == nil; n++ {
				id := fmt.Sprintf("c%d-%d", g, n)
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				ok, err := c.check(cctx, id)
				cancel()
				at := time.Since(start)
				mu.Lock()
				asks++
				mu.Unlock()
				if err == nil && !ok {
					time.Sleep(time.Millisecond)
					continue
				}
				var tokens uint64
				if err == nil {
					tokens = costMinTokens + rand.Uint64N(costMaxTokens-costMinTokens+1)
					time.Sleep(costCallTime)
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					err = c.charge(cctx, id, tokens)
					cancel()
				}
				mu.Lock()
				asks++
				if err != nil {
					res.Errors++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					calls = append(calls, costCall{at, tokens})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		res.Err = fmt.Sprintf("%d errors, the first: %v", res.Errors, firstErr)
	}
	res.Calls, res.Decisions = len(calls), float64(asks)/elapsed.Seconds()
	res.WorstAligned, res.WorstSliding, res.Used = costWindows(calls, d)
	if record != nil {
		most, err := record()
		if err != nil {
			res.Err = "audit: " + err.Error()
		}
		res.Record = float64(most) / costBudget
	}
	return res
}

// costWindows are the most tokens that the calls checked within one whole
// second from the start (aligned), and within any second (sliding), used,
// and what they used over the run, each over the budget.
func costWindows(calls []costCall, d time.Duration) (aligned, sliding, used float64) {
	slices.SortFunc(calls, func(a, b costCall) int { return int(a.at - b.at) })
	per := make([]uint64, int(d/time.Second))
	var total, in, worst uint64
	j := 0
	for _, c := range calls {
		if k := int(c.at / time.Second); k < len(per) {
			per[k] += c.tokens
		}
		total += c.tokens
		in += c.tokens
		for calls[j].at <= c.at-time.Second {
			in -= calls[j].tokens
			j++
		}
		worst = max(worst, in)
	}
	aligned = float64(slices.Max(append(per, 0))) / costBudget
	return aligned, float64(worst) / costBudget, float64(total) / (costBudget * d.Seconds())
}

// costRows are the rows, and what stops the real server they started:
// tblimit serve (a plain rule, charge_after, paired),
// tblimit.v1's Reserve and Commit, the library's, on the embedded engine and
// on a real server when there is one; and redis_rate checking with
// AllowN(0) and charging with AllowN(tokens).
func costRows(cfg *config) ([]costRow, func()) {
	embeddedClient := func() *ledger.Client { return ledger.New(embedded.New()) }
	rows := []costRow{
		serveCostRow("tblimit serve plain/embedded", "", embeddedClient, ""),
		serveCostRow("tblimit serve charge_after/embedded", "", embeddedClient, "charge_after: true"),
		serveCostRow("tblimit serve paired/embedded", "", embeddedClient, "reserve_key: check, settle_key: charge"),
		apiCostRow("tblimit api reserve-commit/embedded", "", embeddedClient),
		libraryCostRow("tblimit reserve-commit/embedded", "", embeddedClient),
	}
	bin, notRun, err := findServer()
	if err != nil {
		notRun = err.Error()
	}
	var srv *server
	var once sync.Once
	real := func() *ledger.Client {
		once.Do(func() {
			s, err := launchServer(context.Background(), bin, cfg.TBDir)
			if err == nil {
				srv = s
			}
		})
		if srv == nil {
			return nil
		}
		cl, err := srv.client()
		if err != nil {
			return nil
		}
		return ledger.New(cl)
	}
	rows = append(rows,
		serveCostRow("tblimit serve charge_after/tigerbeetle", notRun, real, "charge_after: true"),
		serveCostRow("tblimit serve paired/tigerbeetle", notRun, real, "reserve_key: check, settle_key: charge"),
		libraryCostRow("tblimit reserve-commit/tigerbeetle", notRun, real),
		redisCostRow(cfg),
	)
	return rows, func() {
		if srv != nil {
			srv.Stop()
		}
	}
}

// serveCostRow is tblimit serve with one rule of the budget a second, with
// extra keys in its rate_limit block, over loopback gRPC.
func serveCostRow(name, notRun string, client func() *ledger.Client, extra string) costRow {
	paired := extra != "" && extra != "charge_after: true"
	return costRow{name: name, notRun: notRun, open: func(ctx context.Context) (costClient, func() (uint64, error), func(), error) {
		lc := client()
		if lc == nil {
			return nil, nil, nil, fmt.Errorf("no real server")
		}
		domain := fmt.Sprintf("costs-%08x", rand.Uint32())
		block := fmt.Sprintf("{unit: second, requests_per_unit: %d}", costBudget)
		if extra != "" {
			block = fmt.Sprintf("{unit: second, requests_per_unit: %d, %s}", costBudget, extra)
		}
		src := fmt.Sprintf("domain: %s\ndescriptors:\n  - key: user\n    rate_limit: %s\n", domain, block)
		cfg, err := ratelimit.ParseConfig([]string{"costs.yaml"}, map[string][]byte{"costs.yaml": []byte(src)})
		if err != nil {
			return nil, nil, nil, err
		}
		svc, err := ratelimit.New(lc)
		if err != nil {
			return nil, nil, nil, err
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := svc.Load(lctx, cfg); err != nil {
			return nil, nil, nil, err
		}
		res, _ := svc.Resource(cfg.Rules()[0])
		conn, stop, err := serveLoopback(ctx, svc, nil)
		if err != nil {
			return nil, nil, nil, err
		}
		cl := rls.NewRateLimitServiceClient(conn)
		ask := func(ctx context.Context, hits uint64, kv ...string) (bool, error) {
			d := &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: costUser}}, HitsAddend: wrapperspb.UInt64(hits)}
			for i := 0; i+1 < len(kv); i += 2 {
				d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
			}
			resp, err := cl.ShouldRateLimit(ctx, &rls.RateLimitRequest{Domain: domain, Descriptors: []*rlcommon.RateLimitDescriptor{d}})
			return resp.GetOverallCode() == rls.RateLimitResponse_OK, err
		}
		c := &funcCostClient{
			checkF: func(ctx context.Context, id string) (bool, error) {
				if paired {
					return ask(ctx, costMaxTokens, "check", id)
				}
				return ask(ctx, 0)
			},
			chargeF: func(ctx context.Context, id string, tokens uint64) error {
				var err error
				if paired {
					_, err = ask(ctx, tokens, "charge", id)
				} else {
					_, err = ask(ctx, tokens)
				}
				return err
			},
		}
		return c, recordOf(lc, res, costUser), func() { conn.Close(); stop() }, nil
	}}
}

// apiCostRow is tblimit.v1's Reserve (the most a call may use, under its
// request ID) and Commit (what it used), over loopback gRPC.
func apiCostRow(name, notRun string, client func() *ledger.Client) costRow {
	return costRow{name: name, notRun: notRun, open: func(ctx context.Context) (costClient, func() (uint64, error), func(), error) {
		lc := client()
		res, err := costResource(ctx, lc)
		if err != nil {
			return nil, nil, nil, err
		}
		conn, stop, err := serveLoopback(ctx, nil, api.New(lc).Register)
		if err != nil {
			return nil, nil, nil, err
		}
		cl := tblimitv1.NewLimitServiceClient(conn)
		var mu sync.Mutex
		held := map[string]string{}
		c := &funcCostClient{
			checkF: func(ctx context.Context, id string) (bool, error) {
				resp, err := cl.Reserve(ctx, &tblimitv1.ReserveRequest{Resource: res.Name, User: costUser, Amount: costMaxTokens, RequestId: id})
				if err != nil || !resp.GetDecision().GetAllowed() {
					return false, err
				}
				mu.Lock()
				held[id] = resp.GetReservationId()
				mu.Unlock()
				return true, nil
			},
			chargeF: func(ctx context.Context, id string, tokens uint64) error {
				mu.Lock()
				rid := held[id]
				delete(held, id)
				mu.Unlock()
				_, err := cl.Commit(ctx, &tblimitv1.CommitRequest{ReservationId: rid, Amount: tokens})
				return err
			},
		}
		return c, recordOf(lc, res, costUser), func() { conn.Close(); stop() }, nil
	}}
}

// libraryCostRow is ledger.Client.Reserve and CommitN in process.
func libraryCostRow(name, notRun string, client func() *ledger.Client) costRow {
	return costRow{name: name, notRun: notRun, open: func(ctx context.Context) (costClient, func() (uint64, error), func(), error) {
		lc := client()
		if lc == nil {
			return nil, nil, nil, fmt.Errorf("no real server")
		}
		res, err := costResource(ctx, lc)
		if err != nil {
			return nil, nil, nil, err
		}
		var mu sync.Mutex
		held := map[string]*ledger.Reservation{}
		c := &funcCostClient{
			checkF: func(ctx context.Context, id string) (bool, error) {
				rv, err := lc.Reserve(ctx, res, ledger.Request{User: costUser, Amount: costMaxTokens})
				if err != nil || !rv.OK() {
					return false, err
				}
				mu.Lock()
				held[id] = rv
				mu.Unlock()
				return true, nil
			},
			chargeF: func(ctx context.Context, id string, tokens uint64) error {
				mu.Lock()
				rv := held[id]
				delete(held, id)
				mu.Unlock()
				return rv.CommitN(ctx, tokens)
			},
		}
		return c, recordOf(lc, res, costUser), func() {}, nil
	}}
}

// redisCostRow is redis_rate checking with AllowN(0) and charging with
// AllowN(tokens), as a gateway on Redis would.
func redisCostRow(cfg *config) costRow {
	notRun := cfg.RedisNotRun
	if cfg.Redis == "" && notRun == "" {
		notRun = "no Redis (-redis)"
	}
	return costRow{name: "redis_rate check-then-charge", notRun: notRun, open: func(ctx context.Context) (costClient, func() (uint64, error), func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis})
		lim := redis_rate.NewLimiter(rdb)
		limit := redis_rate.PerSecond(costBudget)
		key := fmt.Sprintf("costs-%08x", rand.Uint32())
		c := &funcCostClient{
			checkF: func(ctx context.Context, _ string) (bool, error) {
				r, err := lim.AllowN(ctx, key, limit, 0)
				if err != nil {
					return false, err
				}
				return r.Remaining > 0, nil
			},
			chargeF: func(ctx context.Context, _ string, tokens uint64) error {
				_, err := lim.AllowN(ctx, key, limit, int(tokens))
				return err
			},
		}
		return c, nil, func() { rdb.Close() }, nil
	}}
}

type funcCostClient struct {
	checkF  func(context.Context, string) (bool, error)
	chargeF func(context.Context, string, uint64) error
}

func (f *funcCostClient) check(ctx context.Context, id string) (bool, error) {
	return f.checkF(ctx, id)
}
func (f *funcCostClient) charge(ctx context.Context, id string, tokens uint64) error {
	return f.chargeF(ctx, id, tokens)
}

// costResource creates a resource of the budget a second on a ledger of
// its own.
func costResource(ctx context.Context, lc *ledger.Client) (ledger.Resource, error) {
	if lc == nil {
		return ledger.Resource{}, fmt.Errorf("no real server")
	}
	r := ledger.Resource{Name: fmt.Sprintf("costs%06x", rand.Uint32()&0xffffff), Ledger: 1<<30 + rand.Uint32N(1<<20),
		Kind: ledger.KindRequests, Window: time.Second, DefaultLimit: costBudget, Lazy: true}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return r, lc.CreateResource(cctx, r)
}

// recordOf reads the most units user's record on r held in any window.
func recordOf(lc *ledger.Client, r ledger.Resource, user string) func() (uint64, error) {
	from := time.Now().Add(-time.Second)
	return func() (uint64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		a, err := lc.Audit(ctx, r, user, from, time.Time{})
		return a.MostInWindow, err
	}
}

// serveLoopback serves svc (Envoy's protocol), or register's services, on
// a free loopback port, and returns a connection to it and what stops it.
func serveLoopback(ctx context.Context, svc *ratelimit.Service, register func(grpc.ServiceRegistrar, *http.ServeMux)) (*grpc.ClientConn, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	gs := grpc.NewServer()
	if svc != nil {
		rls.RegisterRateLimitServiceServer(gs, svc)
	}
	if register != nil {
		register(gs, http.NewServeMux())
	}
	go gs.Serve(ln)
	conn, err := dialLoopback(ctx, ln.Addr().String())
	if err != nil {
		gs.Stop()
		return nil, nil, err
	}
	return conn, gs.GracefulStop, nil
}
