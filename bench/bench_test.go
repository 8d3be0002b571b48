package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHistIndexRoundTrip(t *testing.T) {
	for _, v := range []uint64{0, 1, 31, 32, 33, 63, 64, 100, 1000, 12345, 1 << 20, 1<<40 + 12345, 1<<63 + 5} {
		i := histIndex(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d, out of [0, %d)", v, i, histBuckets)
		}
		got := histValue(i)
		if diff := float64(got) - float64(v); diff < -float64(v)/histSub-1 || diff > float64(v)/histSub+1 {
			t.Errorf("histValue(histIndex(%d)) = %d, want within 1/%d", v, got, histSub)
		}
	}
	for v := uint64(1); v < 1<<20; v = v*3/2 + 1 {
		if histIndex(v) > histIndex(v+1) {
			t.Fatalf("histIndex not monotonic at %d", v)
		}
	}
}

func TestHistQuantile(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}} {
		got := h.quantile(c.q)
		if d := got - c.want; d < -c.want/histSub || d > c.want/histSub {
			t.Errorf("quantile(%v) = %v, want %v within 3%%", c.q, got, c.want)
		}
	}
	var empty hist
	if got := empty.quantile(0.5); got != 0 {
		t.Errorf("empty quantile = %v, want 0", got)
	}
}

func TestExpect(t *testing.T) {
	attempts := []uint64{50, 5, 0, 20}
	e := expect(slidingLog, attempts, 10, time.Second, time.Minute)
	if e.Kind != "exact" || e.Value != 10+5+0+10 {
		t.Fatalf("sliding, cell < window: %+v, want exact 25", e)
	}
	if got := e.check(25); got != "exact" {
		t.Errorf("check(25) = %s, want exact", got)
	}
	if got := e.check(26); got != "OVER" {
		t.Errorf("check(26) = %s, want OVER", got)
	}
	if got := e.check(24); got != "UNDER" {
		t.Errorf("check(24) = %s, want UNDER", got)
	}
	e = expect(slidingLog, attempts, 10, 90*time.Second, time.Minute)
	if e.Kind != "at most" || e.Value != 20+5+0+20 {
		t.Errorf("sliding, cell of 1.5 windows: %+v, want at most 45", e)
	}
	// A bucket of 10 per minute, 30 s: up to 10 + 5 per key, one unit of
	// slack per saturated key.
	e = expect(bucket, attempts, 10, 30*time.Second, time.Minute)
	if e.Kind != "at most" || e.Value != 15+5+0+15 || e.Slack != 2 {
		t.Errorf("bucket: %+v, want at most 35, slack 2", e)
	}
	if got := e.check(37); got != "ok" {
		t.Errorf("check(37) = %s, want ok", got)
	}
	if got := e.check(38); got != "OVER" {
		t.Errorf("check(38) = %s, want OVER", got)
	}
}

func TestZipfAttempts(t *testing.T) {
	w := zipfWorkload(1000, 1.1, 10, 5000, 1)
	if len(w.seq) < 5000 || len(w.seq)&(len(w.seq)-1) != 0 {
		t.Fatalf("len(seq) = %d, want a power of two >= 5000", len(w.seq))
	}
	ws := []*worker{{spans: []span{{0, 100}, {200, 300}}}, {spans: []span{{100, 200}}}}
	a := w.attempts(ws)
	var sum uint64
	for _, n := range a {
		sum += n
	}
	if sum != 300 {
		t.Fatalf("attempts sum to %d, want 300", sum)
	}
	if a[0] < a[len(a)-1] {
		t.Errorf("key 0 got %d attempts, the last key %d: want key 0 the most frequent", a[0], a[len(a)-1])
	}
	if got := hotWorkload(5).attempts(ws); len(got) != 1 || got[0] != 300 {
		t.Errorf("hot attempts = %v, want [300]", got)
	}
}

// TestDriveCountsEveryDecisionOnce runs the worker loop on a counter: every
// decision index is made exactly once and recorded in the spans.
func TestDriveCountsEveryDecisionOnce(t *testing.T) {
	const n = 10_007
	seen := make([]atomic.Int32, n)
	keys := func(i int64) int { return int(i) }
	allow := func(_ context.Context, k int) (bool, error) {
		seen[k].Add(1)
		return k%2 == 0, nil
	}
	ws, _, capped := drive(context.Background(), driveOpts{callers: 7, n: n, maxTime: time.Minute, sample: 3}, keys, allow)
	if capped {
		t.Fatal("capped, want all decisions made")
	}
	var admitted, denied, spanned uint64
	var samples uint64
	for _, w := range ws {
		admitted += w.admitted
		denied += w.denied
		samples += w.lat.n
		for _, sp := range w.spans {
			spanned += uint64(sp.end - sp.start)
		}
	}
	if admitted != (n+1)/2 || denied != n/2 || spanned != n {
		t.Errorf("admitted, denied, spanned = %d, %d, %d, want %d, %d, %d", admitted, denied, spanned, (n+1)/2, n/2, n)
	}
	if samples != (n+2)/3 {
		t.Errorf("%d latency samples, want one in 3 = %d", samples, (n+2)/3)
	}
	for i := range seen {
		if c := seen[i].Load(); c != 1 {
			t.Fatalf("decision %d made %d times", i, c)
		}
	}
}

func TestDriveStopsAtMaxTime(t *testing.T) {
	allow := func(context.Context, int) (bool, error) { time.Sleep(time.Millisecond); return true, nil }
	ws, elapsed, capped := drive(context.Background(), driveOpts{callers: 4, n: 1 << 40, maxTime: 50 * time.Millisecond, sample: 1},
		func(int64) int { return 0 }, allow)
	if !capped || elapsed > 2*time.Second {
		t.Fatalf("capped, elapsed = %v, %v, want true, about 50ms", capped, elapsed)
	}
	var spanned, made uint64
	for _, w := range ws {
		made += w.admitted
		for _, sp := range w.spans {
			spanned += uint64(sp.end - sp.start)
		}
	}
	if spanned != made {
		t.Errorf("spans cover %d decisions, %d were made", spanned, made)
	}
}

// TestRunQuick runs the harness end to end on the in-process contenders with
// tiny cells and checks the table, the JSON and that the PNG decodes.
func TestRunQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	t.Setenv("TIGERBEETLE_BIN", "")
	t.Setenv("PATH", "") // no tigerbeetle on PATH either: those rows say why
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := run([]string{"-quick", "-decisions", "3000", "-users", "500", "-callers", "1,4",
		"-hot-limit", "100", "-zipf-limit", "20", "-out", dir,
		"-contenders", "tblimit/embedded,raw engine,x/time/rate,redis_rate,tblimit/tigerbeetle"}, &out, &errs)
	if code != 0 {
		t.Fatalf("run = %d; stderr:\n%s", code, errs.String())
	}
	table := out.String()
	for _, want := range []string{"tblimit/embedded", "raw engine", "x/time/rate", "not run: no binary", "not run: no Redis address", "exact", "targets:"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "UNDER") || strings.Contains(table, "FAILED") {
		t.Errorf("table:\n%s", table)
	}
	js, err := os.ReadFile(filepath.Join(dir, "bench.json"))
	if err != nil || !bytes.Contains(js, []byte(`"ratios"`)) {
		t.Errorf("bench.json: %v\n%s", err, js)
	}
	f, err := os.Open(filepath.Join(dir, "bench.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 300 {
		t.Errorf("chart is %v", b)
	}
}
