// Command growth measures what the embedded default keeps as it decides:
// resident memory, live heap, the Go runtime's memory and data on disk
// after every so many decisions, on known keys and then on new ones, and
// the time a start on the data it left takes to its first answer.
//
// It runs the request-rate recipe on ledger.New(embedded.Open(-data)), as
// tblimit serve does without a cluster, in this process. The cluster clock
// is a manual one moved by 1/-rate seconds a decision, so that as many
// units are held at once (pending transfers) as at that rate in real time,
// however fast the machine decides:
//
//	go run ./growth -keys 100000 -decisions 10000000 -new 1000000 -rate 1000
//
// The figures are printed as a table, one line every -every decisions, and
// the end of each phase says how flat resident memory was over its last
// half (the spread of the samples around their mean).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	_ "github.com/tblimit/tblimit/ledger/embedded/onearena" // as the tblimit command does
	"github.com/tblimit/tblimit/recipes"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "growth:", err)
		os.Exit(1)
	}
}

type config struct {
	data             string
	keys             int
	decisions, fresh int
	rate             float64
	window           time.Duration
	limit            uint64
	callers, every   int
	zipfS            float64
	keepData         bool
	profile, cpu     string
	cache            int64
	userCache        int
}

func run() error {
	var c config
	flag.StringVar(&c.data, "data", "", "the data file (default: a new one under the system's temporary directory, removed at the end)")
	flag.IntVar(&c.keys, "keys", 100_000, "known keys, provisioned before the first phase")
	flag.IntVar(&c.decisions, "decisions", 1_000_000, "decisions on the known keys (Zipf)")
	flag.IntVar(&c.fresh, "new", 100_000, "decisions on new keys, one each, after the known keys'")
	flag.Float64Var(&c.rate, "rate", 1000, "decisions per second of cluster time")
	flag.DurationVar(&c.window, "window", time.Minute, "the limit's window")
	flag.Uint64Var(&c.limit, "limit", 10_000, "each key's limit per window")
	flag.IntVar(&c.callers, "callers", 16, "goroutines deciding at once")
	flag.IntVar(&c.every, "every", 0, "decisions between two samples (default: a twentieth of a phase)")
	flag.Float64Var(&c.zipfS, "zipf-s", 1.1, "the Zipf exponent of the known keys' decisions")
	flag.BoolVar(&c.keepData, "keep", false, "keep the data file")
	flag.Int64Var(&c.cache, "cache", 0, "the engine's cache in bytes (embedded.WithCacheSize; default: the engine's)")
	flag.IntVar(&c.userCache, "user-cache", ledger.DefaultUserCache, "the users the Client keeps a view of (ledger.WithUserCache)")
	flag.StringVar(&c.profile, "heap-profile", "", "write a heap profile at the end of each phase to this file, the phase's name appended")
	flag.StringVar(&c.cpu, "cpu-profile", "", "write a CPU profile of the phases to this file")
	flag.Parse()
	if c.keys < 1 || c.decisions < 0 || c.fresh < 0 || c.rate <= 0 || c.callers < 1 {
		return fmt.Errorf("want -keys ≥ 1, -decisions and -new ≥ 0, -rate > 0, -callers ≥ 1")
	}
	if c.data == "" {
		dir, err := os.MkdirTemp("", "tblimit-growth-")
		if err != nil {
			return err
		}
		c.data = filepath.Join(dir, "data")
		if !c.keepData {
			defer os.RemoveAll(dir)
		}
	}
	clock := embedded.NewManualClock(time.Now())
	opts := []embedded.Option{embedded.WithClock(clock)}
	if c.cache > 0 {
		opts = append(opts, embedded.WithCacheSize(c.cache))
	}
	f, err := embedded.Open(c.data, opts...)
	if err != nil {
		return err
	}
	ctx := context.Background()
	cl := ledger.New(f, ledger.WithUserCache(c.userCache))
	rl, err := recipes.NewRequestRate(cl, recipes.Config{Name: "growth", Ledger: 1, Lazy: true}, recipes.Per(c.limit, c.window))
	if err != nil {
		return err
	}
	if err := rl.Create(ctx); err != nil {
		return err
	}
	known := make([]string, c.keys)
	users := make([]ledger.UserLimit, c.keys)
	for i := range known {
		known[i] = "user-" + strconv.Itoa(i)
		users[i] = ledger.UserLimit{Key: known[i], Limit: c.limit}
	}
	start := time.Now()
	for i := 0; i < len(users); i += 8000 {
		if err := cl.Provision(ctx, rl.Resource(), users[i:min(i+8000, len(users))]...); err != nil {
			return fmt.Errorf("provision: %w", err)
		}
	}
	fmt.Printf("growth: %s, %d known keys provisioned in %v; %g decisions/s of cluster time, window %v, limit %d, %d callers\n\n",
		c.data, c.keys, time.Since(start).Round(time.Millisecond), c.rate, c.window, c.limit, c.callers)
	fmt.Printf("%-7s %12s %10s %10s %10s %10s %12s %12s\n", "phase", "decisions", "rss MB", "heap MB", "go MB", "data MB", "decisions/s", "wall")

	if c.cpu != "" {
		f, err := os.Create(c.cpu)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), c.zipfS, 1, uint64(c.keys-1))
	var zmu sync.Mutex
	knownKey := func(int) string { zmu.Lock(); defer zmu.Unlock(); return known[zipf.Uint64()] }
	freshKey := func(i int) string { return "new-" + strconv.Itoa(i) }
	allow := func(key string) error { _, err := rl.Allow(ctx, key); return err }
	if err := phase(c, "known", c.decisions, knownKey, allow, clock); err != nil {
		return err
	}
	if err := phase(c, "new", c.fresh, freshKey, allow, clock); err != nil {
		return err
	}
	f.Close()
	f, cl, rl = nil, nil, nil

	// A start on what the run left, to its first answer.
	debug.FreeOSMemory()
	before := rss()
	began := time.Now()
	f, err = embedded.Open(c.data, opts...)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	opened := time.Since(began)
	cl = ledger.New(f)
	rl, err = recipes.NewRequestRate(cl, recipes.Config{Name: "growth", Ledger: 1, Lazy: true}, recipes.Per(c.limit, c.window))
	if err == nil {
		_, err = rl.Allow(ctx, known[0])
	}
	answered := time.Since(began)
	after := rss()
	f.Close()
	if err != nil {
		return fmt.Errorf("first answer after the reopen: %w", err)
	}
	fmt.Printf("\nstart: open %v, first answer %v after it began; resident memory %.0f MB more than before it; data %.0f MB\n",
		opened.Round(time.Millisecond), answered.Round(time.Millisecond), float64(after-before)/1e6, float64(dataSize(c.data))/1e6)
	return nil
}

// phase makes n decisions on the keys key(i) returns, c.callers at a time,
// moving the clock on by 1/c.rate seconds a decision, and prints a sample
// every c.every decisions, then how flat resident memory was over the
// phase's second half.
func phase(c config, name string, n int, key func(i int) string, allow func(string) error, clock *embedded.ManualClock) error {
	if n == 0 {
		return nil
	}
	every := c.every
	if every <= 0 {
		every = max(n/20, c.callers)
	}
	step := time.Duration(float64(time.Second) / c.rate)
	var rssHalf []float64
	began, last, lastAt := time.Now(), 0, time.Now()
	errs := make(chan error, c.callers)
	for done := 0; done < n; {
		batch := min(c.callers, n-done)
		var wg sync.WaitGroup
		for k := range batch {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				if err := allow(key(i)); err != nil {
					errs <- err
				}
			}(done + k)
		}
		wg.Wait()
		select {
		case err := <-errs:
			return fmt.Errorf("%s, decision %d: %w", name, done, err)
		default:
		}
		done += batch
		clock.Advance(time.Duration(batch) * step)
		if done/every != (done-batch)/every || done == n {
			r := float64(rss()) / 1e6
			if done > n/2 {
				rssHalf = append(rssHalf, r)
			}
			rate := float64(done-last) / time.Since(lastAt).Seconds()
			live, held := goMemory()
			fmt.Printf("%-7s %12d %10.0f %10.0f %10.0f %10.0f %12.0f %12v\n", name, done, r, float64(live)/1e6, float64(held)/1e6,
				float64(dataSize(c.data))/1e6, rate, time.Since(began).Round(time.Second))
			last, lastAt = done, time.Now()
		}
	}
	if c.profile != "" {
		if err := writeHeapProfile(c.profile + "." + name); err != nil {
			return err
		}
	}
	if len(rssHalf) > 1 {
		lo, hi, sum := rssHalf[0], rssHalf[0], 0.0
		for _, r := range rssHalf {
			lo, hi, sum = min(lo, r), max(hi, r), sum+r
		}
		mean := sum / float64(len(rssHalf))
		fmt.Printf("%-7s resident memory over the second half: %.0f to %.0f MB, %+.0f%% / %+.0f%% of its mean %.0f MB\n",
			name, lo, hi, (lo/mean-1)*100, (hi/mean-1)*100, mean)
	}
	return nil
}

// writeHeapProfile writes a heap profile as of the last garbage collection
// to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// rss is this process's resident memory in bytes.
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// goMemory returns the heap the last garbage collection found live, and
// the memory the Go runtime holds from the system (less what it gave
// back): resident memory past it is memory allocated outside Go's heap,
// Pebble's cache and memory tables.
func goMemory() (live, held uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64() - s[2].Value.Uint64()
}

// dataSize is the size of the data file and of its store (every file
// under embedded.StorePath).
func dataSize(path string) int64 {
	var total int64
	for _, p := range []string{path, embedded.StorePath(path)} {
		filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if info, err := d.Info(); err == nil {
					total += info.Size()
				}
			}
			return nil
		})
	}
	return total
}
