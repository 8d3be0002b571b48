package main

import (
	"math"
	"testing"
	"time"
)

// One key, limit 4 per second, a decision every 25ms for 2.5s: the log
// admits bursts of 4 at 0, 1s and 2s. One caller can merge a burst (it lies
// within one chunk span); leases of K=2 for 50ms cover two of a burst each.
func TestFloorsOneKey(t *testing.T) {
	w := hotWorkload(4)
	f := floors(w, 100, 1, 2500*time.Millisecond, time.Second, 50*time.Millisecond, 2)
	if f == nil {
		t.Fatal("no floor")
	}
	want := floor{Decisions: 100, Admitted: 12, Raw: 100.0 / 12, Exact: 3.0 / 12, Lease: 6.0 / 12,
		WindowLease: 3.0 / 12, SingleShare: 0, LeaseTau: "50ms", LeaseK: 2}
	if !sameFloor(*f, want) {
		t.Fatalf("floors = %+v, want %+v", *f, want)
	}
	// Leases of 1 unit serve one decision each, but no decision is alone:
	// each has another of its key within τ.
	f = floors(w, 100, 1, 2500*time.Millisecond, time.Second, 50*time.Millisecond, 1)
	if f.Lease != 1 || f.SingleShare != 0 {
		t.Fatalf("K=1: lease %v, alone %v; want 1 and 0", f.Lease, f.SingleShare)
	}
	// Decisions 100ms apart with τ = 50ms are all alone; with τ = 150ms none is.
	w = hotWorkload(100)
	if f = floors(w, 10, 1, time.Second, time.Minute, 50*time.Millisecond, 10); f.SingleShare != 1 || f.Lease != 1 {
		t.Fatalf("100ms apart, τ 50ms: alone %v, lease %v; want 1 and 1", f.SingleShare, f.Lease)
	}
	if f = floors(w, 10, 1, time.Second, time.Minute, 150*time.Millisecond, 10); f.SingleShare != 0 || f.Lease != 0.5 {
		t.Fatalf("100ms apart, τ 150ms: alone %v, lease %v; want 0 and 0.5", f.SingleShare, f.Lease)
	}
}

// A key's log grows with what it admits, not with its limit.
func TestFloorsHugeLimit(t *testing.T) {
	w := hotWorkload(1 << 40)
	f := floors(w, 1000, 1, time.Second, time.Minute, time.Millisecond, 1<<36)
	if f.Admitted != 1000 || f.Raw != 1 {
		t.Fatalf("floors = %+v, want all 1000 admitted", *f)
	}
}

// Keys that never repeat cannot share a transfer, whatever the scheme.
func TestFloorsDistinctKeys(t *testing.T) {
	const n = 1 << 10
	w := &workload{name: "zipf", users: n, limit: 1, seq: make([]int32, n), mask: n - 1}
	for i := range w.seq {
		w.seq[i] = int32(i)
	}
	f := floors(w, n, 256, time.Second, time.Second, 100*time.Millisecond, 1)
	want := floor{Decisions: n, Admitted: n, Raw: 1, Exact: 1, Lease: 1, WindowLease: 1, SingleShare: 1, LeaseTau: "100ms", LeaseK: 1}
	if !sameFloor(*f, want) {
		t.Fatalf("floors = %+v, want %+v", *f, want)
	}
}

// A key seen twice, further apart than the callers can hold at once but
// within a lease lifetime: exact cannot merge them, a lease can.
func TestFloorsExactSpan(t *testing.T) {
	const n = 64
	w := &workload{name: "zipf", users: n, limit: 10, seq: make([]int32, n), mask: n - 1}
	for i := range w.seq {
		w.seq[i] = int32(i)
	}
	w.seq[chunk*2] = 0 // two callers: decisions 0 and 2×chunk are never in flight together
	f := floors(w, n, 2, time.Second, time.Minute, time.Second, 10)
	if f.Exact != 1 || f.Lease != float64(n-1)/n {
		t.Fatalf("exact %v, lease %v: want 1 and %v", f.Exact, f.Lease, float64(n-1)/n)
	}
	f = floors(w, n, 3, time.Second, time.Minute, time.Second, 10)
	if f.Exact != float64(n-1)/n {
		t.Fatalf("three callers: exact %v, want %v", f.Exact, float64(n-1)/n)
	}
}

func sameFloor(a, b floor) bool {
	eq := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.Decisions == b.Decisions && a.Admitted == b.Admitted && eq(a.Raw, b.Raw) && eq(a.Exact, b.Exact) &&
		eq(a.Lease, b.Lease) && eq(a.WindowLease, b.WindowLease) && eq(a.SingleShare, b.SingleShare) &&
		a.LeaseTau == b.LeaseTau && a.LeaseK == b.LeaseK
}
