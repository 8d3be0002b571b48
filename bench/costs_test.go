package main

import (
	"testing"
	"time"
)

// The costs set's windows: aligned seconds from the start, any second, and
// the run's total, each over the budget.
func TestCostWindows(t *testing.T) {
	ms := time.Millisecond
	calls := []costCall{{100 * ms, 10_000}, {900 * ms, 10_000}, {1500 * ms, 20_000}, {2950 * ms, 4_000}, {2999 * ms, 6_000}}
	aligned, sliding, used := costWindows(calls, 3*time.Second)
	if aligned != 1.0 || sliding != 1.5 || used != 50_000.0/60_000 {
		t.Fatalf("costWindows = %v, %v, %v; want 1.0 (each second 20,000), 1.5 (0.9 s to 1.9 s), %v", aligned, sliding, used, 50_000.0/60_000)
	}
}
