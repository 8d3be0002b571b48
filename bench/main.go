// Command bench measures request-rate decisions per second of tblimit next
// to the limiters users would pick instead, in one run on one machine, and
// writes a text table, a JSON file and a PNG chart. scripts/bench.sh runs it
// with a local Redis; see README.md.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tblimit/tblimit/ledger"
	_ "github.com/tblimit/tblimit/ledger/embedded/onearena" // as the tblimit command does
)

type config struct {
	Quick bool `json:"quick"`
	// Sustained cells last longer than the window, so that units expire
	// and come back during a cell (see README.md).
	Sustained bool `json:"sustained"`
	// WindowCheck times every decision and checks, for the sliding
	// window contenders, that no key admitted more than its bound in any
	// window (see checkWindows).
	WindowCheck bool          `json:"window_check"`
	Decisions   int64         `json:"decisions_per_cell"`
	MaxTime     time.Duration `json:"-"`
	MaxTimeSec  float64       `json:"max_time_per_cell_s"`
	Callers     []int         `json:"callers"`
	Workloads   []string      `json:"workloads"`
	Users       int           `json:"zipf_users"`
	ChurnKeys   int           `json:"churn_keys,omitempty"`
	ZipfS       float64       `json:"zipf_s"`
	HotLimit    uint64        `json:"hot_limit"`
	ZipfLimit   uint64        `json:"zipf_limit"`
	Window      time.Duration `json:"-"`
	WindowSec   float64       `json:"window_s"`
	Sample      int64         `json:"latency_sample_every"`
	Rounds      int           `json:"rounds"`
	Rev         string        `json:"tblimit_rev"`
	Seed        int64         `json:"seed"`
	Redis       string        `json:"redis_addr"`
	RedisNotRun string        `json:"-"`
	RedisPool   int           `json:"redis_pool_size"`
	Only        []string      `json:"contenders,omitempty"`
	// Name is the base name of the output files: "bench", "sustained"
	// with Sustained, or what -name says (scripts/bench.sh: "arrivals").
	Name string `json:"name,omitempty"`
	// Costs runs the costs set (costs.go) instead of the cells.
	Costs bool `json:"-"`
	// NoMemory skips the probes of memory per active key.
	NoMemory   bool   `json:"no_memory_probe,omitempty"`
	Out        string `json:"-"`
	TBDir      string `json:"-"`
	CPUProfile string `json:"-"`
	Render     string `json:"-"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Costs {
		if err := runCosts(ctx, cfg, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		return 0
	}
	var rep *report
	if cfg.Render != "" {
		rep, err = loadReport(cfg.Render)
	} else {
		rep, err = bench(ctx, cfg, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if err := rep.write(cfg.Out, stdout); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if rep.failed() {
		fmt.Fprintln(stderr, "bench: some cells failed (see the table)")
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := &config{}
	quick := fs.Bool("quick", false, "short cells (200,000 decisions or 2s each, one round; 3s with -sustained) for a smoke run")
	sustained := fs.Bool("sustained", false, "cells longer than the window: -window 2s, cells of 5s (3s with -quick) bound by time only,\n"+
		"-hot-limit 1000, -zipf-limit 20 and -window-check unless given; writes sustained.{txt,json,png} instead of bench.*")
	windowCheck := fs.Bool("window-check", false, "time every decision and check that no key of a sliding window contender admitted more\n"+
		"than its limit in any window (default: on with -sustained)")
	decisions := fs.Int64("decisions", 0, "decisions per cell (default 1,000,000; 200,000 with -quick; unbounded with -sustained)")
	maxTime := fs.Duration("max-time", 0, "time cap per cell for slow contenders (default 5s; 2s with -quick)")
	rounds := fs.Int("rounds", 0, "rounds: each cell runs this many times, contenders interleaved, and the median is kept (default 3; 1 with -quick)")
	callers := fs.String("callers", "1,16,256", "numbers of calling goroutines, comma-separated")
	workloads := fs.String("workloads", "hot,zipf", "workloads: hot (one user), zipf (many users), both provisioned before the clock starts;\n"+
		"churn (Zipf over -churn-keys keys) and fresh (a new key per decision), nothing provisioned: keys first seen in the cell")
	fs.IntVar(&cfg.Users, "users", 100_000, "users of the zipf workload")
	fs.IntVar(&cfg.ChurnKeys, "churn-keys", 10_000_000, "keys the churn workload draws from (Zipf, -zipf-s)")
	fs.Float64Var(&cfg.ZipfS, "zipf-s", 1.1, "Zipf exponent (> 1) of the zipf workload")
	fs.Uint64Var(&cfg.HotLimit, "hot-limit", 10_000, "limit per window of the hot user (1,000 with -sustained)")
	fs.Uint64Var(&cfg.ZipfLimit, "zipf-limit", 10_000, "limit per window of each zipf user (20 with -sustained)")
	fs.DurationVar(&cfg.Window, "window", time.Minute, "window of the limits (whole seconds; 2s with -sustained); longer than a cell makes tblimit's expected count exact")
	fs.Int64Var(&cfg.Sample, "sample", 8, "time one decision in this many for the latency percentiles")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of the zipf key sequence")
	fs.StringVar(&cfg.Redis, "redis", "", "address of the Redis for redis_rate (host:port); empty: the row is not run")
	fs.StringVar(&cfg.RedisNotRun, "redis-not-run", "", "reason to show when there is no Redis")
	fs.IntVar(&cfg.RedisPool, "redis-pool", 0, "go-redis pool size: 0 go-redis's default (10 per CPU), -1 one connection per caller")
	fs.StringVar(&cfg.Rev, "rev", "", "the tblimit revision measured, for the report (scripts/bench.sh passes git describe)")
	only := fs.String("contenders", "", "run only these contenders (comma-separated names; default all but the API set's,\n"+
		"tblimit api/*, tblimit pay/* and tblimit api pay/*, which run only when named here)")
	fs.StringVar(&cfg.Out, "out", "results", "directory for bench.txt, bench.json, bench.png and bench-transfers.png (sustained.* with -sustained)")
	fs.StringVar(&cfg.Name, "name", "", "base name of the output files (default bench, or sustained with -sustained)")
	fs.BoolVar(&cfg.Costs, "costs", false, "run the costs set instead: an AI gateway's calls checked before and charged after (see costs.go);\n"+
		"writes costs.txt and costs.json; cells last 8s unless -max-time")
	memory := fs.Bool("memory", true, "probe the memory per active key of some rows after their first zipf cell")
	fs.StringVar(&cfg.TBDir, "tb-dir", os.TempDir(), "directory for the real server's data file (about 1.1 GB; needs Direct I/O)")
	fs.StringVar(&cfg.Render, "render", "", "measure nothing: render the text, JSON and charts again from this bench.json (or sustained.json)")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of each cell's timed part to PREFIX-<workload>-<callers>-<contender>.pprof")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg.Quick, cfg.Sustained, cfg.NoMemory = *quick, *sustained, !*memory
	cfg.Decisions, cfg.MaxTime, cfg.Rounds = 1_000_000, 5*time.Second, 3
	if cfg.Quick {
		cfg.Decisions, cfg.MaxTime, cfg.Rounds = 200_000, 2*time.Second, 1
	}
	cfg.WindowCheck = *windowCheck
	if cfg.Sustained {
		// Bound by time only: every cell lasts MaxTime, more than a window.
		cfg.Decisions, cfg.MaxTime = 1<<62, 5*time.Second
		if cfg.Quick {
			cfg.MaxTime = 3 * time.Second
		}
		defaults := map[string]func(){
			"window":       func() { cfg.Window = 2 * time.Second },
			"hot-limit":    func() { cfg.HotLimit = 1000 },
			"zipf-limit":   func() { cfg.ZipfLimit = 20 },
			"window-check": func() { cfg.WindowCheck = true },
		}
		for name, f := range defaults {
			if !set[name] {
				f()
			}
		}
	}
	if *rounds > 0 {
		cfg.Rounds = *rounds
	}
	if *decisions > 0 {
		cfg.Decisions = *decisions
	}
	if *maxTime > 0 {
		cfg.MaxTime = *maxTime
	}
	cfg.MaxTimeSec, cfg.WindowSec = cfg.MaxTime.Seconds(), cfg.Window.Seconds()
	for f := range strings.SplitSeq(*callers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-callers: %q is not a positive number", f)
		}
		cfg.Callers = append(cfg.Callers, n)
	}
	for f := range strings.SplitSeq(*workloads, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(workloadNames, f) {
			return nil, fmt.Errorf("-workloads: %q is none of %s", f, strings.Join(workloadNames, ", "))
		}
		cfg.Workloads = append(cfg.Workloads, f)
	}
	if *only != "" {
		for f := range strings.SplitSeq(*only, ",") {
			cfg.Only = append(cfg.Only, strings.TrimSpace(f))
		}
	}
	switch {
	case cfg.Window < time.Second || cfg.Window%time.Second != 0:
		return nil, fmt.Errorf("-window %v: want whole seconds", cfg.Window)
	case cfg.Users < 1 || cfg.Users > 1<<24:
		return nil, fmt.Errorf("-users %d: want 1 to %d", cfg.Users, 1<<24)
	case cfg.ChurnKeys < 1 || cfg.ChurnKeys > 1<<30:
		return nil, fmt.Errorf("-churn-keys %d: want 1 to %d", cfg.ChurnKeys, 1<<30)
	case cfg.ZipfS <= 1:
		return nil, fmt.Errorf("-zipf-s %v: want more than 1", cfg.ZipfS)
	case cfg.HotLimit < 1 || cfg.ZipfLimit < 1 || cfg.HotLimit > 1<<31 || cfg.ZipfLimit > 1<<31:
		return nil, fmt.Errorf("limits must be 1 to %d", 1<<31)
	case cfg.Rounds < 1:
		return nil, fmt.Errorf("-rounds %d: want at least 1", cfg.Rounds)
	case cfg.Sample < 1:
		return nil, fmt.Errorf("-sample %d: want at least 1", cfg.Sample)
	case cfg.Sustained && cfg.MaxTime <= cfg.Window:
		return nil, fmt.Errorf("-sustained: cells of %v are not longer than the window %v", cfg.MaxTime, cfg.Window)
	}
	if slices.ContainsFunc(cfg.Workloads, arrivalWorkload) {
		// Their keys are named before the clock starts, one per decision
		// at most: cells bound by time only would need unbounded names.
		if cfg.Sustained {
			return nil, fmt.Errorf("-workloads churn, fresh: not with -sustained (their cells are bound by -decisions, at most %d)", maxArrivalDecisions)
		}
		if cfg.Decisions > maxArrivalDecisions {
			return nil, fmt.Errorf("-workloads churn, fresh: -decisions %d, want at most %d", cfg.Decisions, maxArrivalDecisions)
		}
	}
	return cfg, nil
}

// maxArrivalDecisions is the most decisions of a cell of churn or fresh:
// the length of the longest Zipf sequence, and the most keys fresh names.
const maxArrivalDecisions = 1 << 23

// newWorkload builds the workload named name for cfg.
func newWorkload(cfg *config, name string) *workload {
	switch name {
	case "hot":
		return hotWorkload(cfg.HotLimit)
	case "churn":
		return churnWorkload(cfg.ChurnKeys, cfg.ZipfS, cfg.ZipfLimit, cfg.Decisions, cfg.Seed)
	case "fresh":
		return freshWorkload(cfg.ZipfLimit, cfg.Decisions)
	}
	return zipfWorkload(cfg.Users, cfg.ZipfS, cfg.ZipfLimit, cfg.Decisions, cfg.Seed)
}

// bench runs every cell: for each workload and number of callers, every
// contender in turn, so that all contenders of a cell run within seconds of
// each other on the same machine.
func bench(ctx context.Context, cfg *config, log io.Writer) (*report, error) {
	bin, tbNotRun, err := findServer()
	if err != nil {
		return nil, fmt.Errorf("%w (unset TIGERBEETLE_BIN to skip the real-server rows)", err)
	}
	var srv *server
	getServer := func() (*server, error) {
		if srv != nil {
			return srv, nil
		}
		fmt.Fprintf(log, "starting tigerbeetle %s (no --development) in %s ...\n", bin, cfg.TBDir)
		s, err := launchServer(ctx, bin, cfg.TBDir)
		if err != nil {
			return nil, err
		}
		srv = s
		return s, nil
	}
	real, closeReal := realContenders(getServer, tbNotRun)
	serve, closeServe := serveContenders(cfg.Window, getServer, tbNotRun)
	apiRows, closeAPI := apiContenders(cfg.Window, getServer, tbNotRun)
	defer func() {
		closeReal()
		closeServe()
		closeAPI()
		if srv != nil {
			if err := srv.Stop(); err != nil {
				fmt.Fprintln(log, "bench: stopping tigerbeetle:", err)
			}
		}
	}()
	leased := tblimitEmbedded("tblimit/embedded+leases", slidingBound, withLeases())
	leased.leaseLifetime = leaseLifetime
	all := []*contender{
		tblimitEmbedded("tblimit/embedded", slidingLog),
		tblimitEmbedded("tblimit/embedded+coalesce", slidingLog, ledger.WithCoalescing(0)),
		leased,
		rawEngine(),
	}
	all = append(all, real...)
	all = append(all, modelledContenders()...)
	all = append(all, redisRate(cfg.Redis, cfg.RedisNotRun, cfg.RedisPool), xRate())
	all = append(all, twoLimitContenders(cfg.Redis, cfg.RedisNotRun, cfg.RedisPool)...)
	all = append(all, serve...)
	all = append(all, gubernatorRow())
	all = append(all, apiRows...)
	var contenders []*contender
	for _, c := range all {
		if len(cfg.Only) == 0 && !c.onlyNamed || slices.Contains(cfg.Only, c.name) {
			contenders = append(contenders, c)
		}
	}
	if len(contenders) == 0 {
		return nil, fmt.Errorf("-contenders %q matches none of the contenders", cfg.Only)
	}
	if bin != "" && slices.ContainsFunc(contenders, func(c *contender) bool { return slices.Contains(real, c) }) {
		if _, err := getServer(); err != nil {
			return nil, err
		}
	}

	rep := newReport(cfg, contenders, bin)
	// The key names, made before any cell: every cell of every workload
	// uses the first w.users of them (each contender keeps its cells
	// apart: a fresh engine, ledger, domain, daemon or key prefix per cell).
	workloads := make([]*workload, len(cfg.Workloads))
	n := 1
	for i, name := range cfg.Workloads {
		workloads[i] = newWorkload(cfg, name)
		n = max(n, workloads[i].users)
		fmt.Fprintln(log, workloads[i])
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	id := 0
	var sharedEnd time.Time // when the last cell on the real server ended
	for _, w := range workloads {
		for _, callers := range cfg.Callers {
			runs := make([][]*result, len(contenders))
			for round := range cfg.Rounds {
				// Rotate the order from round to round, so that no contender
				// always runs first (or right after the slowest).
				for j := range contenders {
					k := (j + round) % len(contenders)
					if err := ctx.Err(); err != nil {
						return nil, fmt.Errorf("interrupted: %w", err)
					}
					c := contenders[k]
					if c.limits != nil && w.name != "zipf" {
						continue // the rows of two limits per key run on the Zipf mix only
					}
					if c.warmOnly && w.arrivals() {
						continue
					}
					id++
					if c.shared && c.notRun == "" && cfg.MaxTime >= cfg.Window && !sharedEnd.IsZero() {
						// Let the previous cell's transfers expire first: the
						// server's expiry work is part of the cell that causes it.
						if err := sleep(ctx, time.Until(sharedEnd.Add(cfg.Window+200*time.Millisecond))); err != nil {
							return nil, fmt.Errorf("interrupted: %w", err)
						}
					}
					cl := cell{id: id, w: w, callers: callers, window: cfg.Window, keys: keys}
					r := measure(ctx, cfg, c, cl, log)
					if c.shared {
						sharedEnd = time.Now()
					}
					runs[k] = append(runs[k], r)
					if r.NotRun == "" || round == 0 {
						fmt.Fprintf(log, "[%d/%d] %s\n", round+1, cfg.Rounds, r.progress())
					}
				}
			}
			for k, rs := range runs {
				if len(rs) == 0 {
					continue
				}
				m := median(rs)
				if w.name == "zipf" && callers == cfg.Callers[0] && !cfg.NoMemory { // once per row and run
					addMemory(ctx, contenders[k], m, cell{w: w, window: cfg.Window, keys: keys}, func() int { id++; return id }, log)
				}
				rep.add(m)
			}
		}
	}
	rep.finish()
	if srv != nil {
		rep.Meta.TigerBeetle = serverVersion(bin)
	}
	rep.Meta.Redis = redisVersion(cfg.Redis, rep.Meta.Redis)
	return rep, nil
}

// sleep waits for d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// median returns the run with the median decisions/s (the lower middle one
// of an even number), with every run's decisions/s in Rounds.
func median(rs []*result) *result {
	var ran []*result
	for _, r := range rs {
		if !r.ran() {
			return r // not run, or failed: say why
		}
		ran = append(ran, r)
	}
	slices.SortFunc(ran, func(a, b *result) int { return cmp.Compare(a.DecisionsPerSec, b.DecisionsPerSec) })
	m := ran[(len(ran)-1)/2]
	for _, r := range rs {
		m.Rounds = append(m.Rounds, r.DecisionsPerSec)
	}
	return m
}

// measure runs one cell of one contender.
func measure(ctx context.Context, cfg *config, c *contender, cl cell, log io.Writer) *result {
	r := &result{Workload: cl.w.name, Callers: cl.callers, Contender: c.name, Semantics: c.semantics.String()}
	if c.notRun != "" {
		r.NotRun = c.notRun
		return r
	}
	inst, err := c.setup(ctx, cl)
	if err != nil {
		r.Failed = "setup: " + err.Error()
		return r
	}
	defer func() {
		if inst.close != nil {
			inst.close()
		}
	}()
	var before, clientBefore map[string]opCount
	if inst.ops != nil {
		before = inst.ops()
	}
	if inst.clientOps != nil {
		clientBefore = inst.clientOps()
	}
	var modelBefore modelCount
	if inst.model != nil {
		modelBefore = inst.model()
	}
	// The window check needs every admission's time; every contender's
	// decisions are timed then, so that all pay the same clock reads.
	opts := driveOpts{callers: cl.callers, n: cfg.Decisions, maxTime: cfg.MaxTime, sample: cfg.Sample,
		timeAll: cfg.WindowCheck, record: cfg.WindowCheck && c.semantics != bucket}
	runtime.GC()
	m0 := mallocs()
	stopProfile := startProfile(cfg.CPUProfile, cl, c, log)
	ws, elapsed, capped := drive(ctx, opts, cl.w.key, inst.allow)
	stopProfile()
	m1 := mallocs()
	r.fill(c, cl, ws, elapsed, capped, m1-m0)
	if inst.ops != nil {
		source := "engine"
		switch {
		case inst.opsSource != "":
			source = inst.opsSource
		case !c.inProcess:
			source = "client calls"
		}
		r.setOps(before, inst.ops(), source)
	}
	if inst.clientOps != nil {
		r.ClientOps = diffOps(clientBefore, inst.clientOps())
	}
	if inst.model != nil && elapsed > 0 {
		m := inst.model()
		r.ModelBusy = float64(m.busy-modelBefore.busy) / float64(elapsed)
		if n := m.requests - modelBefore.requests; n > 0 {
			r.ModelOverran = float64(m.overran-modelBefore.overran) / float64(n)
		}
	}
	r.setCost()
	if opts.record {
		r.Windows = checkWindows(ws, c.windowBounds(cl.w.limit, cl.window))
		for _, wr := range r.Windows {
			if wr.Check == "OVER" {
				r.Check = "OVER"
			}
		}
	}
	return r
}

func startProfile(prefix string, cl cell, c *contender, log io.Writer) func() {
	if prefix == "" {
		return func() {}
	}
	name := fmt.Sprintf("%s-%s-%d-%s.pprof", prefix, cl.w.name, cl.callers,
		strings.NewReplacer("/", "_", " ", "_").Replace(c.name))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		fmt.Fprintln(log, "bench: cpuprofile:", err)
		return func() {}
	}
	f, err := os.Create(name)
	if err != nil {
		fmt.Fprintln(log, "bench: cpuprofile:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(log, "bench: cpuprofile:", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
