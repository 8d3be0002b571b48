package main

import (
	"context"
	"testing"
	"time"
)

func TestExpectLimits(t *testing.T) {
	attempts := []uint64{5, 50, 500}
	// Over 2.5 s, a sliding log of 10/s and 100/min admits at most 30 per
	// key (10 in each of 3 windows of a second), a bucket 10+25 = 35.
	if e := expectLimits(slidingLog, attempts, twoLimits, 2500*time.Millisecond); e.Value != 5+30+30 || e.Kind != "at most" || e.Slack != 0 {
		t.Errorf("sliding log: %+v, want at most 65", e)
	}
	if e := expectLimits(bucket, attempts, twoLimits, 2500*time.Millisecond); e.Value != 5+35+35 || e.Slack != 2 {
		t.Errorf("bucket: %+v, want at most 75 with slack 2", e)
	}
	if b := limitBounds(twoLimits); len(b) != 2 || b[0].Bound != 10 || b[1].Length != time.Minute {
		t.Errorf("limitBounds = %+v", b)
	}
}

// Two x/time/rate limiters per key admit the tighter limit's burst at once,
// and deny the rest.
func TestXRateTwoAllOrNothing(t *testing.T) {
	w := zipfWorkload(1, 1.1, 0, 1, 1)
	inst, err := xRateTwo().setup(context.Background(), cell{w: w, keys: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 1000 {
		if ok, _ := inst.allow(context.Background(), 0); ok {
			admitted++
		}
	}
	if admitted < 10 || admitted > 12 { // 10 at once, and what refills while the loop runs
		t.Fatalf("admitted %d of 1000 at once, want about 10", admitted)
	}
}
