package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestChurnWorkload(t *testing.T) {
	w := churnWorkload(1_000_000, 1.1, 10, 5000, 1)
	if w.name != "churn" || !w.arrivals() || w.universe != 1_000_000 {
		t.Fatalf("churn workload %+v", w)
	}
	// Numbered in the order of first appearance: each key is at most one
	// above the highest seen before it.
	next := int32(0)
	for i, k := range w.seq {
		if k > next {
			t.Fatalf("seq[%d] = %d, want at most %d", i, k, next)
		}
		if k == next {
			next++
		}
	}
	if int(next) != w.users || w.users >= len(w.seq) || w.users < len(w.seq)/20 {
		t.Errorf("%d distinct keys, users %d, in %d decisions", next, w.users, len(w.seq))
	}
	a := w.attempts([]*worker{{spans: []span{{0, int64(len(w.seq))}}}})
	if len(a) != w.users {
		t.Fatalf("attempts of %d keys, want %d", len(a), w.users)
	}
	for k, n := range a {
		if n == 0 {
			t.Fatalf("key %d never decided", k)
		}
	}
}

func TestFreshWorkload(t *testing.T) {
	w := freshWorkload(5, 1000)
	if !w.arrivals() || w.users != 1000 || w.key(0) != 0 || w.key(999) != 999 {
		t.Fatalf("fresh workload %+v", w)
	}
	ws := []*worker{{spans: []span{{0, 300}, {600, 700}}}, {spans: []span{{300, 600}}}}
	a := w.attempts(ws)
	for k, n := range a {
		if want := uint64(0); k >= 700 && n != want || k < 700 && n != 1 {
			t.Fatalf("key %d: %d attempts", k, n)
		}
	}
	if e := expect(slidingLog, a, 1, time.Second, time.Minute); e.Kind != "exact" || e.Value != 700 {
		t.Errorf("expect = %+v, want exactly 700", e)
	}
}

func TestParseFlagsArrivals(t *testing.T) {
	cfg, err := parseFlags([]string{"-workloads", "zipf,churn,fresh", "-name", "arrivals", "-memory=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Workloads, ",") != "zipf,churn,fresh" || cfg.ChurnKeys != 10_000_000 || cfg.Name != "arrivals" || !cfg.NoMemory {
		t.Errorf("%+v", cfg)
	}
	for _, args := range [][]string{
		{"-workloads", "churn", "-sustained"},
		{"-workloads", "fresh", "-decisions", "100000000"},
		{"-workloads", "cold"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// TestArrivalsProvisionNothing sets the rows of the arrivals up on a churn
// cell: nothing is created for any key before the first decision, each
// key then admits exactly its limit, concurrent first sights of one key
// included, and the accounts created are counted.
func TestArrivalsProvisionNothing(t *testing.T) {
	const limit = 3
	w := churnWorkload(100_000, 1.1, limit, 256, 1)
	keys := make([]string, w.users)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	serve, closeServe := serveContenders(time.Minute, nil, "no binary")
	defer closeServe()
	rows := []*contender{tblimitEmbedded("tblimit/embedded", slidingLog), rawEngine(), serve[0], xRate(), gubernatorRow()}
	for _, c := range modelledContenders() {
		if c.name == "tblimit/modelled" || c.name == "raw client/modelled" {
			rows = append(rows, c)
		}
	}
	for _, c := range rows {
		t.Run(c.name, func(t *testing.T) {
			inst, err := c.setup(context.Background(), cell{id: 1, w: w, callers: 8, window: time.Minute, keys: keys})
			if err != nil {
				t.Fatal(err)
			}
			if inst.close != nil {
				defer inst.close()
			}
			if inst.ops != nil {
				if n := inst.ops()["create_accounts"].Events; n > 4 {
					t.Errorf("%d accounts created before the first decision", n)
				}
			}
			// Eight callers at once, each deciding each of the first keys once.
			const users = 12
			var admitted [users]atomic.Int32
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for k := range users {
						ok, err := inst.allow(context.Background(), k)
						if err != nil {
							t.Error(err)
							return
						}
						if ok {
							admitted[k].Add(1)
						}
					}
				})
			}
			wg.Wait()
			for k := range users {
				if n := admitted[k].Load(); n != limit {
					t.Errorf("key %d admitted %d of 8, want %d", k, n, limit)
				}
			}
			if inst.ops != nil {
				if n := inst.ops()["create_accounts"].Events; n < users {
					t.Errorf("%d accounts created for %d keys", n, users)
				}
			}
		})
	}
}

func TestArrivalRatios(t *testing.T) {
	row := func(wl string, name string, dps float64, decisions int64, newKeys, requests uint64) *result {
		r := &result{Workload: wl, Callers: 16, Contender: name, DecisionsPerSec: dps, Decisions: decisions, Admitted: uint64(decisions),
			NewKeys: newKeys, Check: "exact", ClientOps: map[string]opCount{"create_transfers": {Requests: requests, Events: uint64(decisions)}}}
		r.setCost()
		return r
	}
	rep := &report{Meta: meta{Config: &config{Workloads: []string{"zipf", "churn", "fresh"}}}, Results: []*result{
		row("zipf", "tblimit/embedded", 1000, 1000, 0, 500),
		row("churn", "tblimit/embedded", 500, 1000, 200, 700),
		row("fresh", "tblimit/embedded", 250, 1000, 1000, 1000),
		row("churn", "redis_rate", 100, 1000, 200, 0),
		row("fresh", "raw engine", 100, 1000, 1000, 2000), // no zipf cell: no ratio
	}}
	rep.finish()
	if len(rep.Arrivals) != 2 {
		t.Fatalf("arrivals = %+v, want 2", rep.Arrivals)
	}
	c, f := rep.Arrivals[0], rep.Arrivals[1]
	if c.Workload != "churn" || c.Ratio != 0.5 || c.NewKeysPerDecision != 0.2 || c.RequestsPerDecision != 0.7 || c.BaselineRequestsPerDecision != 0.5 {
		t.Errorf("churn: %+v", c)
	}
	if f.Workload != "fresh" || f.Ratio != 0.25 || f.NewKeysPerDecision != 1 {
		t.Errorf("fresh: %+v", f)
	}
	var out bytes.Buffer
	rep.arrivalsText(&out)
	if !strings.Contains(out.String(), "churn÷zipf") || !strings.Contains(out.String(), "0.50") || !strings.Contains(out.String(), "0.25") {
		t.Errorf("text:\n%s", out.String())
	}
	// The targets are judged on the warm cells: tblimit/embedded's 250/s on
	// fresh does not count against its 1,000,000/s.
	for _, tg := range rep.Targets {
		if strings.HasPrefix(tg.Target, "tblimit/embedded: at least") && strings.Contains(tg.Result, "fresh") {
			t.Errorf("target %+v judged on an arrivals cell", tg)
		}
	}
}

// TestRunArrivals runs the arrivals end to end on the in-process rows with
// tiny cells: every sliding window row exact, req/dec and the ratios shown.
func TestRunArrivals(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	t.Setenv("TIGERBEETLE_BIN", "")
	t.Setenv("PATH", "")
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := run([]string{"-quick", "-decisions", "3000", "-users", "500", "-churn-keys", "100000", "-callers", "1,4",
		"-zipf-limit", "20", "-out", dir, "-name", "arrivals", "-workloads", "zipf,churn,fresh", "-memory=false",
		"-contenders", "tblimit/embedded,raw engine,x/time/rate,tblimit serve/embedded,gubernator"}, &out, &errs)
	if code != 0 {
		t.Fatalf("run = %d; stderr:\n%s", code, errs.String())
	}
	table := out.String()
	for _, want := range []string{"req/dec", "acc/dec", "churn÷zipf", "arrivals, nothing provisioned"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	rep := readReport(t, filepath.Join(dir, "arrivals.json"))
	for _, r := range rep.Results {
		if r.Check != "exact" && r.Check != "ok" {
			t.Errorf("%s/%d/%s: check %s", r.Workload, r.Callers, r.Contender, r.Check)
		}
		if arrivalWorkload(r.Workload) && r.NewKeys == 0 {
			t.Errorf("%s/%d/%s: no new keys counted", r.Workload, r.Callers, r.Contender)
		}
	}
	if len(rep.Arrivals) != 2*2*3 { // tblimit/embedded, raw engine, serve; churn and fresh; 2 callers
		t.Errorf("%d arrival ratios, want 12: %+v", len(rep.Arrivals), rep.Arrivals)
	}
	checkCosts(t, rep)
}
