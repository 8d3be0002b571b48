package main

import (
	"context"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// hist is a log-linear latency histogram in nanoseconds, HDR-like: exact
// below 32 ns, then 32 buckets per power of two (at most 1/32 = 3% wide).
// Recording is two shifts and an increment; each worker has its own.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
}

const (
	histSubBits = 5
	histSub     = 1 << histSubBits
	histBuckets = (64 - histSubBits + 1) * histSub
)

func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1
	return (shift+1)*histSub + int(v>>shift) - histSub
}

// histValue returns the middle of bucket i.
func histValue(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	shift := i/histSub - 1
	low := uint64(i%histSub+histSub) << shift
	return low + (uint64(1)<<shift)/2
}

func (h *hist) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histIndex(uint64(d))]++
	h.n++
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the value below which a fraction q of the samples lie.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n-1)) + 1
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(histValue(i))
		}
	}
	return time.Duration(histValue(histBuckets - 1))
}

// span is a run of decisions [start, end) of the cell's key sequence that
// one worker made.
type span struct{ start, end int64 }

// worker is what one calling goroutine counts.
type worker struct {
	admitted, denied, errors uint64
	firstErr                 error
	spans                    []span
	lat                      hist
	adms                     []admission // with driveOpts.record
}

// admission is one admitted decision: its key, and when the call began and
// returned, in ns since the cell's epoch (monotonic clock). The limiter
// admitted it at some instant in [start, end].
type admission struct {
	key        int32
	start, end int64
}

// chunk is how many decisions a worker claims at a time from the shared
// counter: one atomic add per chunk keeps the counter off the hot path.
const chunk = 16

// driveOpts says how to drive a cell.
type driveOpts struct {
	callers int           // calling goroutines
	n       int64         // decisions
	maxTime time.Duration // time cap
	sample  int64         // one decision in sample goes into the latency histogram
	timeAll bool          // read the clock around every decision, not only the sampled ones
	record  bool          // with timeAll: keep every admission in worker.adms
}

// drive runs a cell: o.callers goroutines make decisions number 0..o.n-1
// of the key sequence keys (decision i is for key keys(i)) until all are
// made, or o.maxTime has passed, or ctx is done.
func drive(ctx context.Context, o driveOpts, keys func(i int64) int,
	allow func(ctx context.Context, key int) (bool, error)) (ws []*worker, elapsed time.Duration, capped bool) {
	callers, n, sample := o.callers, o.n, o.sample
	var next atomic.Int64
	var stop atomic.Bool
	ws = make([]*worker, callers)
	for i := range ws {
		ws[i] = new(worker) // separate allocations: no false sharing
	}
	var ready, done sync.WaitGroup
	ready.Add(callers)
	startGun := make(chan struct{})
	epoch := time.Now()
	for g := range callers {
		done.Add(1)
		go func(w *worker) {
			defer done.Done()
			ready.Done()
			<-startGun
			for !stop.Load() {
				start := next.Add(chunk) - chunk
				if start >= n {
					return
				}
				end := min(start+chunk, n)
				i := start
				for ; i < end && !stop.Load(); i++ {
					k := keys(i)
					if o.timeAll {
						t0 := time.Since(epoch)
						ok, err := allow(ctx, k)
						t1 := time.Since(epoch)
						if i%sample == 0 {
							w.lat.record(t1 - t0)
						}
						w.count(ok, err)
						if ok && err == nil && o.record {
							w.adms = append(w.adms, admission{int32(k), int64(t0), int64(t1)})
						}
					} else if i%sample == 0 {
						t0 := time.Since(epoch)
						ok, err := allow(ctx, k)
						w.lat.record(time.Since(epoch) - t0)
						w.count(ok, err)
					} else {
						w.count(allow(ctx, k))
					}
				}
				if i > start {
					w.spans = append(w.spans, span{start, i})
				}
			}
		}(ws[g])
	}
	ready.Wait()
	t0 := time.Now()
	timer := time.AfterFunc(o.maxTime, func() { stop.Store(true) })
	cancelWatch := context.AfterFunc(ctx, func() { stop.Store(true) })
	close(startGun)
	done.Wait()
	elapsed = time.Since(t0)
	timer.Stop()
	cancelWatch()
	return ws, elapsed, doneCount(ws) < n
}

func (w *worker) count(ok bool, err error) {
	switch {
	case err != nil:
		w.errors++
		if w.firstErr == nil {
			w.firstErr = err
		}
	case ok:
		w.admitted++
	default:
		w.denied++
	}
}

func doneCount(ws []*worker) int64 {
	var n int64
	for _, w := range ws {
		n += int64(w.admitted + w.denied + w.errors)
	}
	return n
}

// mallocs returns the number of heap allocations so far (stops the world:
// call between cells only).
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}
