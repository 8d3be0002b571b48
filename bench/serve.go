package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	tb "github.com/tigerbeetle/tigerbeetle-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/service/ratelimit"
)

// The rows of `tblimit serve`: a ratelimit.Service (Envoy's
// RateLimitService) served over gRPC on loopback, asked by the cell's
// callers through one shared grpc.ClientConn, as one gateway would ask it.
// Each decision is one ShouldRateLimit call with one descriptor (user, the
// key); OK admits. The configuration has one rule, requests_per_unit = the
// workload's limit per unit = the window, so the rows run only where the
// window is one whole unit of Envoy's (second, minute, hour, day, week...).

// serveDescriptor is the descriptor key of the rule of every serve row.
const serveDescriptor = "user"

// The serve rows' names, and the in-process tblimit row of the same engine
// that each is compared with (the service's overhead).
var serveRows = []struct{ name, inProcess string }{
	{"tblimit serve/embedded", "tblimit/embedded"},
	{"tblimit serve/modelled", "tblimit/modelled"},
	{"tblimit serve/tigerbeetle", "tblimit/tigerbeetle"},
	{"tblimit serve/journal", "tblimit serve/journal on tmpfs"},
}

// The rows of tblimit serve on the embedded default, a journal file
// (embedded.Open, what tblimit serve runs on without --addresses): in the
// system's temporary directory (a disk, usually), and on tmpfs (/dev/shm),
// where an fsync costs nothing, so that their ratio is what the disk costs.
const (
	serveJournalName      = "tblimit serve/journal"
	serveJournalTmpfsName = "tblimit serve/journal on tmpfs"
	tmpfsDir              = "/dev/shm"
)

// servePairs are the ratios the report computes for the serve rows (see
// report.finish): each serve row over gubernator and over its engine's
// in-process row, and the in-process row over gubernator.
func servePairs() [][2]string {
	pairs := [][2]string{{"tblimit/embedded", gubernatorName}}
	for _, s := range serveRows {
		pairs = append(pairs, [2]string{s.name, gubernatorName}, [2]string{s.name, s.inProcess})
	}
	return pairs
}

// envoyUnit is the unit of Envoy's rate limit configuration whose length
// is window, if there is one.
func envoyUnit(window time.Duration) (ratelimit.TimeUnit, bool) {
	for u := ratelimit.Second; u <= ratelimit.Week; u++ {
		if u.Window() == window {
			return u, true
		}
	}
	return 0, false
}

// serveContenders are the serve rows on the embedded engine, on the model
// of a real server, and on the shared real server (srv; tbNotRun says why
// there is none). The returned function closes the real server's client.
func serveContenders(window time.Duration, srv func() (*server, error), tbNotRun string) ([]*contender, func()) {
	unit, ok := envoyUnit(window)
	notRun := ""
	if !ok {
		// We considered a window of the nearest unit for these rows alone,
		// but their limits would then not be the other rows' limits: a
		// comparison of different limits is no comparison.
		notRun = fmt.Sprintf("the window %v is no whole Envoy unit (second, minute, hour, day, week...)", window)
	}
	emb := serveInProcess(serveRows[0].name, unit, notRun, func() (engine, func(), error) {
		e := embedded.New()
		return e, e.Close, nil
	})
	mod := &contender{name: serveRows[1].name, semantics: slidingLog, inProcess: true, notRun: notRun,
		setup: func(ctx context.Context, c cell) (*instance, error) {
			var stop func()
			inst, err := modelledSetup(func(sc *simnet.Client) (*instance, error) {
				inst, err := serveSetup(ctx, ledger.New(sc), unit, c)
				if err == nil {
					stop = inst.close
				}
				return inst, err
			})
			if err != nil {
				return nil, err
			}
			closeModel := inst.close
			inst.close = func() {
				stop()
				closeModel()
			}
			return inst, nil
		}}
	tbRow := &contender{name: serveRows[2].name, semantics: slidingLog, notRun: notRun, shared: true}
	if tbNotRun != "" {
		tbRow.notRun = tbNotRun
	}
	var tc *countingClient // one client for the run, as the other real-server rows
	tbRow.setup = func(ctx context.Context, c cell) (*instance, error) {
		if tc == nil {
			s, err := srv()
			if err != nil {
				return nil, err
			}
			if tc, err = s.client(); err != nil {
				return nil, err
			}
		}
		// ledger.New on a client it did not dial: the cell leaves it open.
		// The service derives its ledger from the rule, whose domain is
		// the cell's own: cells on the shared server never meet.
		inst, err := serveSetup(ctx, ledger.New(tc), unit, c)
		if err != nil {
			return nil, err
		}
		inst.ops = tc.ops
		return inst, nil
	}
	closeReal := func() {
		if tc != nil {
			tc.Close()
		}
	}
	disk := serveJournal(serveJournalName, os.TempDir(), unit, notRun)
	tmpfs := serveJournal(serveJournalTmpfsName, tmpfsDir, unit, notRun)
	if st, err := os.Stat(tmpfsDir); err != nil || !st.IsDir() {
		tmpfs.notRun = tmpfsDir + " is not there"
	}
	return []*contender{emb, mod, tbRow, disk, tmpfs}, closeReal
}

// engine is an embedded engine a serve row runs on: in memory, or kept in
// a journal file.
type engine interface {
	tb.Client
	Stats() embedded.Stats
}

// serveInProcess is a serve row on the engine open makes for each cell,
// which its close function ends.
func serveInProcess(name string, unit ratelimit.TimeUnit, notRun string, open func() (engine, func(), error)) *contender {
	return &contender{name: name, semantics: slidingLog, inProcess: true, notRun: notRun,
		setup: func(ctx context.Context, c cell) (*instance, error) {
			e, done, err := open()
			if err != nil {
				return nil, err
			}
			inst, err := serveSetup(ctx, ledger.New(e), unit, c)
			if err != nil {
				done()
				return nil, err
			}
			inst.ops = func() map[string]opCount { return engineOps(e.Stats()) }
			stop := inst.close
			inst.close = func() {
				stop()
				done()
			}
			return inst, nil
		}}
}

// serveJournal is a serve row on a journal file in dir, new for each cell
// and removed after it.
func serveJournal(name, dir string, unit ratelimit.TimeUnit, notRun string) *contender {
	return serveInProcess(name, unit, notRun, func() (engine, func(), error) {
		f, err := os.CreateTemp(dir, "tblimit-bench-*.journal")
		if err != nil {
			return nil, nil, err
		}
		path := f.Name()
		f.Close()
		os.Remove(path)
		j, err := embedded.Open(path)
		if err != nil {
			return nil, nil, err
		}
		return j, func() {
			j.Close()
			os.Remove(path)
		}, nil
	})
}

// serveSetup serves a ratelimit.Service on lc for cell c (serveOn) and
// asks it by Envoy's protocol: one ShouldRateLimit of one descriptor per
// decision. Its close stops the server; lc's engine is the caller's to close.
func serveSetup(ctx context.Context, lc *ledger.Client, unit ratelimit.TimeUnit, c cell) (*instance, error) {
	s, err := serveOn(ctx, lc, unit, c, nil)
	if err != nil {
		return nil, err
	}
	client := rls.NewRateLimitServiceClient(s.conn)
	keys, domain := c.keys, s.domain
	return &instance{
		allow: func(ctx context.Context, k int) (bool, error) {
			// A new request per decision, as a gateway builds one per request.
			resp, err := client.ShouldRateLimit(ctx, &rls.RateLimitRequest{Domain: domain,
				Descriptors: []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: serveDescriptor, Value: keys[k]}}}}})
			if err != nil {
				return false, err
			}
			return resp.GetOverallCode() == rls.RateLimitResponse_OK, nil
		},
		clientOps: func() map[string]opCount { return ledgerOps(lc.Stats()) },
		close:     s.close,
	}, nil
}

// served is a ratelimit server of one cell and a connection to it.
type served struct {
	domain string
	res    ledger.Resource // the resource of the configuration's one rule
	conn   *grpc.ClientConn
	close  func() // closes conn, then stops the server
}

// serveOn serves a ratelimit.Service on lc for cell c, as tblimit serve
// does: one rule of the workload's limit per unit on a domain of the
// cell's own, every key of the cell provisioned on its resource (a warm
// workload; on the arrivals, none: the rule's resource is Lazy, each key
// is provisioned by its first decision), a gRPC server on a free loopback
// port (with register's services beside Envoy's, when it is not nil, as
// tblimit serve --api registers tblimit.v1) and one connection to it, made
// before the clock starts.
func serveOn(ctx context.Context, lc *ledger.Client, unit ratelimit.TimeUnit, c cell, register func(grpc.ServiceRegistrar, *http.ServeMux)) (*served, error) {
	domain := fmt.Sprintf("bench-c%d", c.id)
	src := fmt.Sprintf("domain: %s\ndescriptors:\n  - key: %s\n    rate_limit:\n      unit: %s\n      requests_per_unit: %d\n",
		domain, serveDescriptor, unit, c.w.limit)
	cfg, err := ratelimit.ParseConfig([]string{"bench.yaml"}, map[string][]byte{"bench.yaml": []byte(src)})
	if err != nil {
		return nil, err
	}
	svc, err := ratelimit.New(lc)
	if err != nil {
		return nil, err
	}
	if err := svc.Load(ctx, cfg); err != nil {
		return nil, err
	}
	res, ok := svc.Resource(cfg.Rules()[0])
	if !ok {
		return nil, fmt.Errorf("the rule of domain %s has no resource", domain)
	}
	if !c.w.arrivals() {
		users := make([]ledger.UserLimit, c.w.users)
		for i := range users {
			users[i] = ledger.UserLimit{Key: ratelimit.UserKey([]string{c.keys[i]}), Limit: c.w.limit}
		}
		if err := lc.Provision(ctx, res, users...); err != nil {
			return nil, fmt.Errorf("provision %d users: %w", len(users), err)
		}
	}
	srv, err := ratelimit.NewServer(svc, ratelimit.ServerOptions{Register: register})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln, nil) }()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}
	conn, err := dialLoopback(ctx, ln.Addr().String())
	if err != nil {
		stop()
		return nil, err
	}
	return &served{domain: domain, res: res, conn: conn, close: func() {
		conn.Close()
		stop()
	}}, nil
}

// dialLoopback returns a plain-text gRPC connection to addr, connected.
func dialLoopback(ctx context.Context, addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			conn.Close()
			return nil, fmt.Errorf("connecting to %s: %w (last state %v)", addr, ctx.Err(), st)
		}
	}
	return conn, nil
}

// serveText says, for every cell with a serve row, its decisions/s over
// gubernator's and over the in-process row of its engine.
func (rep *report) serveText(w io.Writer) {
	var lines []string
	for _, q := range rep.Ratios {
		if strings.HasPrefix(q.Tblimit, "tblimit serve/") || q.Peer == gubernatorName {
			lines = append(lines, fmt.Sprintf("  %s, %d callers: %s ÷ %s = %.3g", q.Workload, q.Callers, q.Tblimit, q.Peer, q.Ratio))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\ntblimit serve (Envoy's RateLimitService over loopback gRPC) and gubernator: decisions/s")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w, `serve rows: one ShouldRateLimit of one descriptor per decision, callers sharing one
  grpc.ClientConn; ÷ tblimit/<engine> is the service's throughput over the recipe called in
  process on the same engine (below 1: the cost of gRPC and the service). gubernator: one
  daemon in process on loopback, one GetRateLimits of one TOKEN_BUCKET request per decision,
  callers sharing one connection.`)
}
