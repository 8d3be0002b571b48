package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	// Units taken at 0 return at 60 s and at 120 s: three limits fit in a
	// cell of exactly two windows.
	e = expect(slidingBound, attempts, 10, 2*time.Minute, time.Minute)
	if e.Kind != "at most" || e.Value != 30+5+0+20 {
		t.Errorf("leased, cell of 2 windows: %+v, want at most 55", e)
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

func TestMaxInWindow(t *testing.T) {
	s := int64(time.Second)
	// Short calls at 0, 1 s, 2 s and a call from 0.5 s to 2.6 s: within
	// any 2 s, two short calls; the long call never fits with them.
	g := []admission{{0, 0, 10}, {0, s / 2, 2*s + s/2 + s/10}, {0, s, s + 10}, {0, 2 * s, 2*s + 10}}
	for _, c := range []struct {
		l    int64
		stop uint64
		want uint64
	}{
		{2 * s, 10, 2},
		{2*s + s/2, 10, 3}, // [0, 2.5 s) holds 0, 1 s, 2 s
		{3 * s, 10, 4},     // [0, 3 s) holds them all
		{3 * s, 1, 4},      // stops at the first count above 1
		{s / 2, 10, 1},
	} {
		if got := maxInWindow(g, c.l, c.stop); got != c.want {
			t.Errorf("maxInWindow(l=%v, stop=%d) = %d, want %d", time.Duration(c.l), c.stop, got, c.want)
		}
	}
}

func TestCheckWindows(t *testing.T) {
	ms := int64(time.Millisecond)
	// Key 3 admits 2 per 100 ms, key 1 admits 3 in 50 ms once; the workers
	// recorded them out of order.
	ws := []*worker{
		{adms: []admission{{3, 0, ms}, {3, 100 * ms, 101 * ms}, {1, 500 * ms, 501 * ms}}},
		{adms: []admission{{3, 10 * ms, 11 * ms}, {1, 520 * ms, 521 * ms}, {3, 110 * ms, 111 * ms}, {1, 540 * ms, 541 * ms}}},
	}
	got := checkWindows(ws, []windowBound{{100 * time.Millisecond, 3}, {100 * time.Millisecond, 2}})
	if len(got) != 2 {
		t.Fatalf("checkWindows = %+v, want 2 results", got)
	}
	if r := got[0]; r.MaxSeen != 3 || r.Key != 1 || r.Check != "ok" || r.LengthSec != 0.1 {
		t.Errorf("bound 3 per 100ms: %+v, want 3 seen for key 1, ok", r)
	}
	if r := got[1]; r.MaxSeen != 3 || r.Check != "OVER" {
		t.Errorf("bound 2 per 100ms: %+v, want 3 seen, OVER", r)
	}
	if r := checkWindows(nil, []windowBound{{time.Second, 1}}); r[0].MaxSeen != 0 || r[0].Check != "ok" {
		t.Errorf("no admissions: %+v, want 0 seen, ok", r)
	}
}

// TestDriveRecordsAdmissions checks that with record every admission is
// kept once, with its call's times.
func TestDriveRecordsAdmissions(t *testing.T) {
	const n = 1000
	allow := func(_ context.Context, k int) (bool, error) { return k%3 == 0, nil }
	ws, _, _ := drive(context.Background(), driveOpts{callers: 3, n: n, maxTime: time.Minute, sample: 1, timeAll: true, record: true},
		func(i int64) int { return int(i % 7) }, allow)
	var adms, admitted uint64
	for _, w := range ws {
		admitted += w.admitted
		for _, a := range w.adms {
			adms++
			if a.key%3 != 0 || a.end < a.start {
				t.Fatalf("admission %+v: want a key divisible by 3, end >= start", a)
			}
		}
	}
	if adms != admitted || adms == 0 {
		t.Errorf("%d admissions recorded, %d admitted", adms, admitted)
	}
}

func TestParseFlagsSustained(t *testing.T) {
	cfg, err := parseFlags([]string{"-sustained"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Sustained || !cfg.WindowCheck || cfg.Window != 2*time.Second || cfg.MaxTime != 5*time.Second ||
		cfg.HotLimit != 1000 || cfg.ZipfLimit != 20 || cfg.Decisions < 1<<40 || cfg.Rounds != 3 {
		t.Errorf("-sustained: %+v", cfg)
	}
	cfg, err = parseFlags([]string{"-sustained", "-quick", "-hot-limit", "7", "-window-check=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxTime != 3*time.Second || cfg.HotLimit != 7 || cfg.ZipfLimit != 20 || cfg.WindowCheck || cfg.Rounds != 1 {
		t.Errorf("-sustained -quick -hot-limit 7 -window-check=false: %+v", cfg)
	}
	if _, err := parseFlags([]string{"-sustained", "-max-time", "2s"}, io.Discard); err == nil {
		t.Error("-sustained with cells as long as the window: no error")
	}
	cfg, err = parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sustained || cfg.WindowCheck || cfg.Window != time.Minute || cfg.HotLimit != 10_000 {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestTransfersSummary(t *testing.T) {
	res := func(wl string, callers int, name string, transfers, admitted uint64) *result {
		r := &result{Workload: wl, Callers: callers, Contender: name, Admitted: admitted,
			ClientOps: map[string]opCount{"create_transfers": {Requests: 1, Events: transfers}, "lookup_accounts": {Requests: 1, Events: 1}}}
		r.setCost()
		return r
	}
	rep := &report{Meta: meta{Config: &config{}}, Results: []*result{
		res("zipf", 256, "tblimit/embedded", 1000, 1000),
		res("zipf", 256, "tblimit/embedded+coalesce", 150, 1000),
		res("zipf", 256, "tblimit/embedded+leases", 60, 1000),
		res("zipf", 256, "raw engine", 4000, 1000),
		res("hot", 16, "tblimit/embedded", 1200, 1000),
		res("hot", 16, "tblimit/embedded+leases", 10, 1000),
	}}
	if c := rep.Results[0].cost(); c == nil || c.TransfersPerAdmitted != 1 || c.EventsPerAdmitted != 1.001 {
		t.Fatalf("cost = %+v, want 1 transfer and 1.001 events per admitted", c)
	}
	rep.transfers()
	if len(rep.Transfers) != 2 {
		t.Fatalf("transfers = %+v, want 2 cells", rep.Transfers)
	}
	z := rep.Transfers[0]
	if !z.Acceptance || z.VsPlain.Exact != 0.15 || z.VsPlain.ExactMet != "met" || z.VsPlain.Lease != 0.06 || z.VsPlain.LeaseMet != "missed" ||
		z.VsRaw.Lease != 0.015 || z.VsRaw.LeaseMet != "met" {
		t.Errorf("zipf/256: %+v", z)
	}
	h := rep.Transfers[1]
	if h.Acceptance || h.Exact != 0 || h.VsPlain.ExactMet != "" || h.VsPlain.LeaseMet != "met" || h.Raw != 0 || h.VsRaw.LeaseMet != "" {
		t.Errorf("hot/16: %+v", h)
	}
	var verdicts []string
	for _, tg := range rep.Targets {
		if strings.HasPrefix(tg.Target, "transfers, ") {
			verdicts = append(verdicts, tg.Met)
		}
	}
	if want := []string{"missed", "met", "not run", "not run", "not run", "not run"}; !slices.Equal(verdicts, want) {
		t.Errorf("transfers targets = %v, want %v", verdicts, want)
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
		"-contenders", "tblimit/embedded,tblimit/embedded+coalesce,tblimit/embedded+leases,raw engine,x/time/rate,redis_rate,tblimit/tigerbeetle"}, &out, &errs)
	if code != 0 {
		t.Fatalf("run = %d; stderr:\n%s", code, errs.String())
	}
	table := out.String()
	for _, want := range []string{"tblimit/embedded", "raw engine", "x/time/rate", "not run: no binary", "not run: no Redis address", "exact", "targets:",
		"tr/adm", "ev/adm", "\ntransfers per admitted decision (tr/adm)", "lease/plain"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "UNDER") || strings.Contains(table, "FAILED") {
		t.Errorf("table:\n%s", table)
	}
	rep := readReport(t, filepath.Join(dir, "bench.json"))
	if len(rep.Ratios) == 0 || len(rep.Transfers) != 4 {
		t.Errorf("bench.json: %d ratios, transfers cells %+v, want some and 4", len(rep.Ratios), rep.Transfers)
	}
	checkCosts(t, rep)
	checkPNG(t, filepath.Join(dir, "bench.png"))
	checkPNG(t, filepath.Join(dir, "bench-transfers.png"))
}

// TestRunSustained runs a short sustained run: cells longer than the
// window, every admission checked per window.
func TestRunSustained(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	t.Setenv("TIGERBEETLE_BIN", "")
	t.Setenv("PATH", "")
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := run([]string{"-sustained", "-quick", "-window", "1s", "-max-time", "1200ms", "-users", "300", "-callers", "4",
		"-hot-limit", "200", "-zipf-limit", "5", "-out", dir,
		"-contenders", "tblimit/embedded,tblimit/embedded+leases,raw engine,x/time/rate"}, &out, &errs)
	if code != 0 {
		t.Fatalf("run = %d; stderr:\n%s", code, errs.String())
	}
	table := out.String()
	for _, want := range []string{"sustained: cells of 1.2s", "max/win", "200/200", "tr/adm", "transfers, embedded"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "FAILED") {
		t.Errorf("table:\n%s", table)
	}
	rep := readReport(t, filepath.Join(dir, "sustained.json"))
	for _, r := range rep.Results {
		if r.Check != "ok" {
			t.Errorf("%s/%s: check %s, want ok", r.Workload, r.Contender, r.Check)
		}
		if r.Contender == "x/time/rate" {
			if len(r.Windows) != 0 {
				t.Errorf("x/time/rate has window checks: %+v", r.Windows)
			}
			continue
		}
		want := 1
		if r.Contender == "tblimit/embedded+leases" {
			want = 2
		}
		if len(r.Windows) != want || r.Windows[0].MaxSeen == 0 {
			t.Errorf("%s/%s: window checks %+v, want %d with admissions", r.Workload, r.Contender, r.Windows, want)
		}
		// Units came back during the cell: the hot user admitted more
		// than one limit.
		if r.Workload == "hot" && r.Admitted <= 200 {
			t.Errorf("%s/%s: admitted %d, want more than one window's limit", r.Workload, r.Contender, r.Admitted)
		}
	}
	checkCosts(t, rep)
	checkPNG(t, filepath.Join(dir, "sustained.png"))
	checkPNG(t, filepath.Join(dir, "sustained-transfers.png"))
}

func readReport(t *testing.T, path string) *report {
	t.Helper()
	js, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rep := &report{}
	if err := json.Unmarshal(js, rep); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rep
}

// checkCosts checks that every tblimit row on the embedded engine has its
// cost counted by the engine and by its ledger.Client, and that both agree.
func checkCosts(t *testing.T, rep *report) {
	t.Helper()
	for _, r := range rep.Results {
		if !strings.HasPrefix(r.Contender, "tblimit/embedded") || !r.ran() {
			continue
		}
		if len(r.Cost) != 2 || r.Cost[0].Source != "engine" || r.Cost[1].Source != "ledger.Client" {
			t.Errorf("%s/%d/%s: cost %+v, want engine and ledger.Client", r.Workload, r.Callers, r.Contender, r.Cost)
			continue
		}
		if e, c := r.Cost[0], r.Cost[1]; e.Transfers != c.Transfers || e.Events != c.Events || c.Transfers == 0 {
			t.Errorf("%s/%d/%s: engine counted %+v, the client sent %+v", r.Workload, r.Callers, r.Contender, e, c)
		}
	}
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 300 {
		t.Errorf("%s is %v", path, b)
	}
}

// TestServeAndGubernatorRows sets the rows of tblimit serve on the embedded
// engine and of gubernator up on a tiny cell and decides on it: each admits
// exactly the limit of the key it is asked about, and the serve row's
// ledger.Client counts what it sent.
func TestServeAndGubernatorRows(t *testing.T) {
	serve, closeServe := serveContenders(time.Minute, nil, "no binary")
	defer closeServe()
	keys := []string{"user-0", "user-1", "user-2"}
	for _, c := range []*contender{serve[0], gubernatorRow()} {
		t.Run(c.name, func(t *testing.T) {
			inst := smallCell(t, c, keys)
			for _, k := range []struct{ key, calls, want int }{{0, 10, 3}, {1, 2, 2}, {0, 1, 0}} {
				admitted := 0
				for range k.calls {
					ok, err := inst.allow(context.Background(), k.key)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						admitted++
					}
				}
				if admitted != k.want {
					t.Errorf("%d calls for key %d: admitted %d, want %d", k.calls, k.key, admitted, k.want)
				}
			}
			if inst.clientOps != nil && inst.clientOps()["create_transfers"].Events == 0 {
				t.Errorf("client ops %+v: no transfer counted", inst.clientOps())
			}
		})
	}
	if serve[2].notRun != "no binary" {
		t.Errorf("serve row on a real server without one: not run %q, want the reason given", serve[2].notRun)
	}
	serve, _ = serveContenders(2*time.Second, nil, "")
	for _, c := range serve {
		if !strings.Contains(c.notRun, "no whole Envoy unit") {
			t.Errorf("%s with a window of 2s: not run %q, want no whole unit", c.name, c.notRun)
		}
	}
}

// TestProbeMemory probes gubernator's memory on a small cell: every key is
// decided once on fresh daemons, and the figures are filled in. Keys enough
// that theirs outweighs what the collector finds live by chance (with 200,
// a busy machine's run once held less than the fixed part).
func TestProbeMemory(t *testing.T) {
	keys := make([]string, 2000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	id := 0
	m, err := probeMemory(context.Background(), gubernatorRow(), cell{w: zipfWorkload(len(keys), 1.1, 5, 64, 1), window: time.Minute, keys: keys},
		func() int { id++; return id })
	if err != nil {
		t.Fatal(err)
	}
	if m.Keys != len(keys) || m.TotalBytes <= m.FixedBytes || m.Per100kKeys <= 0 || id != 3 {
		t.Errorf("probeMemory = %+v after %d cells, want %d keys, more held than fixed, 3 cells", m, id, len(keys))
	}
}
