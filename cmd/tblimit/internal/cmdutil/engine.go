package cmdutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tblimit/tblimit/ledger/embedded"
)

// The embedded engine keeps in memory an index of its account IDs and its
// pending transfers' expiry, the rest in a store on disk with a bounded
// cache (--cache); a Client keeps the users it decided for lately
// (--user-cache): its memory grows with its keys, not with its decisions.
// A process that holds it says so before its memory hurts (see
// engineGuard), with what to do instead.

// useCluster is what to do about an embedded engine that outgrew its
// process.
const useCluster = "the embedded engine keeps every account's ID and every pending transfer's expiry in memory, " +
	"besides its --cache (and, in serve, the users of --user-cache); " +
	"for more keys than that, use a TigerBeetle cluster (tblimit tigerbeetle up, then --addresses; docs/operations.md)"

// engineGuard watches an embedded engine's process: its live heap against
// a bound. It warns (once a level)
// as the heap passes half, three quarters and nine tenths of the bound;
// past the bound it makes the engine refuse create requests, so that calls
// fail as when a cluster does not answer (each command's --unavailable
// applies) rather than the process being killed for want of memory, and
// takes them again once the heap is back under nine tenths of it.
type engineGuard struct {
	f      *embedded.File
	bound  uint64 // live heap bytes; 0: none
	warn   func(string)
	live   func() uint64
	warned int // the highest level warned of: 0, 50, 75, 90, 100
}

func newEngineGuard(f *embedded.File, bound uint64, warn func(string)) *engineGuard {
	return &engineGuard{f: f, bound: bound, warn: warn, live: liveHeap}
}

// check warns of what changed since the last check, and refuses or takes
// create requests.
func (g *engineGuard) check() {
	if g.bound == 0 {
		return
	}
	live := g.live()
	level := 0
	for _, l := range []int{50, 75, 90, 100} {
		if live*100 >= g.bound*uint64(l) {
			level = l
		}
	}
	switch {
	case g.warned == 100 && level >= 90:
		return // refusing until back under nine tenths
	case g.warned == 100:
		g.f.Refuse(nil)
		g.warn(fmt.Sprintf("the process holds %s, under nine tenths of its bound (--max-memory %s) again: taking new decisions", formatBytes(live), formatBytes(g.bound)))
	case level == 100:
		g.f.Refuse(fmt.Errorf("the process holds %s of live heap, its bound (--max-memory %s)", formatBytes(live), formatBytes(g.bound)))
		g.warn(fmt.Sprintf("the process holds %s, past its bound (--max-memory %s): refusing new decisions (they fail as when the cluster does not answer) until it is back under %s; %s",
			formatBytes(live), formatBytes(g.bound), formatBytes(g.bound/10*9), useCluster))
	case level > g.warned:
		g.warn(fmt.Sprintf("the process holds %s, %d%% of its bound (--max-memory %s); past it, new decisions are refused; %s",
			formatBytes(live), level, formatBytes(g.bound), useCluster))
	default:
		return // each level is warned of once
	}
	g.warned = level
}

// run checks every interval until stop is closed.
func (g *engineGuard) run(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			g.check()
		}
	}
}

// start checks once, so that a process already past its bound refuses its
// first request, then every interval; the returned function stops it.
func (g *engineGuard) start(interval time.Duration) (stop func()) {
	g.check()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); g.run(interval, done) }()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// liveHeap is the heap the last garbage collection found live, or, before
// the first, the heap in use.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if v := s[0].Value; v.Kind() == metrics.KindUint64 && v.Uint64() > 0 {
		return v.Uint64()
	}
	if v := s[1].Value; v.Kind() == metrics.KindUint64 {
		return v.Uint64()
	}
	return 0
}

// machineMemory is the memory this process may use: its cgroup's limit
// when it has one, else the machine's; 0 if neither can be read.
func machineMemory() uint64 {
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return n
		}
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// memoryBound is the live heap bound of a process holding the embedded
// engine: max, if given (0: none), else half the memory it may use. It also
// sets the Go runtime's soft memory limit, unless GOMEMLIMIT does, to
// nine tenths of that memory, so that the collector works harder, rather
// than the heap doubling, as the bound nears.
func memoryBound(max string) (uint64, error) {
	total := machineMemory()
	if total > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(min(total/10*9, 1<<62)))
	}
	if max != "" {
		return ParseBytes(max)
	}
	return total / 2, nil
}

// ParseBytes parses a size: a whole number of bytes, or with a unit: KiB,
// MiB, GiB, TiB (powers of 1024), kB, MB, GB, TB (powers of 1000).
func ParseBytes(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') {
		i--
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	mult := map[string]uint64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
		"kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]
	n, err := strconv.ParseUint(num, 10, 64)
	switch {
	case num == "" || err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("%q: want a size such as 512MiB, 8GiB or 0", s)
	case mult == 0:
		return 0, fmt.Errorf("%q: unknown unit %q (want B, KiB, MiB, GiB, TiB, kB, MB, GB or TB)", s, unit)
	case err != nil || n > (1<<63)/mult:
		return 0, fmt.Errorf("%q: too large", s)
	}
	return n * mult, nil
}

// formatBytes writes n in MiB or GiB, or in bytes when small.
func formatBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// warnTo returns a warn function writing "tblimit: warning: ..." lines to w.
func warnTo(w io.Writer) func(string) {
	var mu sync.Mutex
	return func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(w, "tblimit: warning:", msg)
	}
}
