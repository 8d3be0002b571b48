package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
)

// memoryRows are the contenders whose memory per active key is measured
// (probeMemory): all in this process, so that the Go heap holds all their
// state.
var memoryRows = []string{"tblimit/embedded", serveRows[0].name, gubernatorName, "x/time/rate"}

// memoryUse is the live heap a contender holds for its keys, measured on
// fresh instances of its own, outside the timed cells (probeMemory).
type memoryUse struct {
	// Keys is how many keys the large probe decided, once each, all
	// admitted.
	Keys int `json:"keys"`
	// FixedBytes is the live heap after a probe of one key, less the live
	// heap before its setup: the server, the engine, the connection.
	FixedBytes int64 `json:"fixed_bytes"`
	// TotalBytes is the same after the probe of Keys keys.
	TotalBytes int64 `json:"total_bytes"`
	// Per100kKeys is (TotalBytes − FixedBytes) / (Keys − 1) × 100,000:
	// what 100,000 more keys, each decided once, hold.
	Per100kKeys float64 `json:"bytes_per_100k_keys"`
}

// probeMemory measures c's live heap for one key and for all of cl's
// workload's keys (see memoryUse), each probe a fresh instance on a cell of
// its own (id from nextID) whose every key is decided once, by 16 callers.
// It runs three probes, the first to warm up.
func probeMemory(ctx context.Context, c *contender, cl cell, nextID func() int) (*memoryUse, error) {
	n := cl.w.users
	if n < 2 {
		return nil, fmt.Errorf("memory: %d keys, want at least 2", n)
	}
	// The first probe is thrown away: what the first instance in the
	// process initializes once (gubernator's globals, gRPC's) is no key's.
	var heaps [3]int64
	for i, keys := range []int{1, 1, n} {
		pc := cell{id: nextID(), w: &workload{name: cl.w.name, users: keys, limit: cl.w.limit}, callers: 16, window: cl.window, keys: cl.keys}
		h, err := heapHeld(ctx, c, pc)
		if err != nil {
			return nil, fmt.Errorf("memory, %d keys: %w", keys, err)
		}
		heaps[i] = h
	}
	return &memoryUse{Keys: n, FixedBytes: heaps[1], TotalBytes: heaps[2],
		Per100kKeys: float64(heaps[2]-heaps[1]) / float64(n-1) * 100_000}, nil
}

// heapHeld sets c up on pc, decides each of pc's keys once and returns the
// live heap then, less the live heap before the setup.
func heapHeld(ctx context.Context, c *contender, pc cell) (int64, error) {
	before := liveHeap()
	inst, err := c.setup(ctx, pc)
	if err != nil {
		return 0, err
	}
	defer func() {
		if inst.close != nil {
			inst.close()
		}
	}()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, pc.callers)
	for g := range pc.callers {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < pc.w.users; k = int(next.Add(1) - 1) {
				ok, err := inst.allow(ctx, k)
				if err == nil && !ok {
					err = fmt.Errorf("key %d denied on its first decision", k)
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	after := liveHeap()
	runtime.KeepAlive(inst)
	return int64(after) - int64(before), nil
}

// liveHeap is the heap in use by reachable objects: HeapAlloc right after
// two garbage collections (the second frees what sync.Pools let go of in
// the first).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// addMemory sets r.Memory, for a row of memoryRows that ran, from a
// probeMemory on cl's workload, and logs it (or why it failed).
func addMemory(ctx context.Context, c *contender, r *result, cl cell, nextID func() int, log io.Writer) {
	if !r.ran() || !slices.Contains(memoryRows, c.name) {
		return
	}
	m, err := probeMemory(ctx, c, cl, nextID)
	if err != nil {
		fmt.Fprintf(log, "%s: %v\n", c.name, err)
		return
	}
	r.Memory = m
	fmt.Fprintf(log, "%s: %s per 100,000 active keys (fixed %s)\n", c.name, mib(m.Per100kKeys), mib(float64(m.FixedBytes)))
}

// memoryText writes the memory per 100,000 active keys of the rows that
// measured it.
func (rep *report) memoryText(w io.Writer) {
	var rs []*result
	for _, r := range rep.Results {
		if r.Memory != nil {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nmemory per 100,000 active keys (live Go heap)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tper 100,000 keys\tfixed\tkeys\t")
	for _, r := range rs {
		m := r.Memory
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", r.Contender, mib(m.Per100kKeys), mib(float64(m.FixedBytes)), thousands(float64(m.Keys)))
	}
	tw.Flush()
	fmt.Fprintln(w, `measured once per row, on fresh instances outside the timed cells, each key of the zipf
  workload's limit decided once (all admitted) by 16 callers: HeapAlloc after two GCs, less
  the same before the setup, for one key (fixed; after a first probe of one key, thrown
  away) and for every key of the workload; per 100,000 keys is the difference scaled.
  Everything is in this process: the serve row holds the engine (accounts, one pending
  transfer per key), the service, its gRPC server and the client's connection; gubernator,
  its daemon and the connection. Goroutine stacks are not counted.`)
}

// mib formats bytes in MiB with three significant digits.
func mib(b float64) string { return fmt.Sprintf("%.3g MiB", b/(1<<20)) }
