package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestModelledRows sets each modelled row up on a small cell and makes a few
// decisions: the limit holds, and what was sent is counted as the model's
// requests.
func TestModelledRows(t *testing.T) {
	keys := []string{"user-0", "user-1", "user-2"}
	for _, c := range modelledContenders() {
		t.Run(c.name, func(t *testing.T) {
			inst := smallCell(t, c, keys)
			if inst.opsSource != modelledOps {
				t.Errorf("ops source %q, want %q", inst.opsSource, modelledOps)
			}
			before := inst.ops()
			admitted := 0
			for range 10 {
				ok, err := inst.allow(context.Background(), 0)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					admitted++
				}
			}
			if max := 3; admitted > max || (c.semantics == slidingLog && admitted != max) {
				t.Errorf("admitted %d of 10 for a limit of 3", admitted)
			}
			ops := diffOps(before, inst.ops())
			if ops["create_transfers"].Requests == 0 {
				t.Errorf("ops %+v: no create_transfers request counted", ops)
			}
		})
	}
}

func TestRealServerTargets(t *testing.T) {
	row := func(wl string, callers int, name string, dps float64, p50 int64, events, admitted uint64, check string) *result {
		r := &result{Workload: wl, Callers: callers, Contender: name, DecisionsPerSec: dps, Admitted: admitted, Check: check,
			Latency: latency{P50: p50}, ClientOps: map[string]opCount{"create_transfers": {Requests: 1, Events: events}}}
		r.setCost()
		return r
	}
	rep := &report{Meta: meta{Config: &config{}}, Results: []*result{
		row("zipf", 1, "tblimit/modelled", 500, 1400e3, 2000, 1000, "exact"),
		row("zipf", 1, "raw client/modelled", 1600, 400e3, 1000, 1000, "exact"),
		row("zipf", 16, "tblimit/modelled", 9500, 1e6, 1050, 1000, "exact"),
		row("zipf", 16, "raw client/modelled", 10000, 1e6, 1000, 1000, "exact"),
		row("zipf", 16, "redis_rate", 9000, 1e6, 0, 1000, "ok"),
		row("hot", 256, "tblimit/modelled", 50000, 1e6, 10, 10, "exact"),
		row("hot", 256, "raw client/modelled", 100000, 1e6, 10, 10, "OVER"),
		row("hot", 256, "redis_rate", 30000, 1e6, 0, 10, "ok"),
	}}
	rep.finish()
	got := map[string]target{}
	for _, tg := range rep.Targets {
		if strings.HasPrefix(tg.Target, "real server, modelled") {
			got[tg.Target[len("real server, modelled, burst: "):]] = tg
		} else if strings.HasPrefix(tg.Target, "real server, tigerbeetle") && tg.Met != "not run" {
			t.Errorf("%s: %s, want not run", tg.Target, tg.Met)
		}
	}
	for _, c := range []struct{ prefix, met, result string }{
		{"plain ≥ 90%", "missed", "zipf/16 95%, hot/256 50%"},
		{"plain ahead of redis_rate", "met", "zipf/16 1.06x, hot/256 1.67x"},
		{"plain ≤ 1.1 events", "missed", "zipf/1 2, zipf/16 1.05"},
		{"plain p50 at one caller", "missed", "zipf/1 3.50x"},
		{"every sliding window row", "missed", "5 of 6 rows; not: hot/256 raw client/modelled OVER"},
	} {
		var tg *target
		for name, v := range got {
			if strings.HasPrefix(name, c.prefix) {
				tg = &v
			}
		}
		if tg == nil {
			t.Errorf("no target %q in %v", c.prefix, got)
			continue
		}
		if tg.Met != c.met || tg.Result != c.result {
			t.Errorf("%s: %s %q, want %s %q", tg.Target, tg.Met, tg.Result, c.met, c.result)
		}
	}
	if tg := got["plain ≥ 90% of the raw client's decisions/s at 16+ callers (hot and zipf)"]; len(tg.Cells) != 2 || tg.Cells[1].Met {
		t.Errorf("cells %+v, want zipf/16 met and hot/256 missed", tg.Cells)
	}

	rep.Meta.Config.Sustained = true
	rep.Targets = nil
	rep.realServerTargets()
	for _, tg := range rep.Targets {
		if strings.Contains(tg.Target, "events per admitted") {
			t.Errorf("sustained report checks %q", tg.Target)
		}
		if strings.Contains(tg.Target, "modelled") && strings.Contains(tg.Target, "90%") && tg.Result != "zipf/16 95%" {
			t.Errorf("sustained: %s = %q, want only the zipf cell", tg.Target, tg.Result)
		}
	}
}

// TestRunModelled runs the modelled rows end to end with tiny cells.
func TestRunModelled(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	t.Setenv("TIGERBEETLE_BIN", "")
	t.Setenv("PATH", "")
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := run([]string{"-quick", "-decisions", "400", "-max-time", "400ms", "-users", "200", "-callers", "1,8",
		"-hot-limit", "100", "-zipf-limit", "20", "-out", dir,
		"-contenders", "tblimit/modelled,tblimit/modelled+coalesce,tblimit/modelled+leases,raw client/modelled"}, &out, &errs)
	if code != 0 {
		t.Fatalf("run = %d; stderr:\n%s", code, errs.String())
	}
	table := out.String()
	for _, want := range []string{"raw client/modelled", "tblimit/modelled+leases", "real server, modelled, burst", "transfers, modelled"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "FAILED") {
		t.Errorf("table:\n%s", table)
	}
	rep := readReport(t, filepath.Join(dir, "bench.json"))
	for _, r := range rep.Results {
		if r.Check != "exact" && r.Check != "ok" {
			t.Errorf("%s/%d/%s: check %s", r.Workload, r.Callers, r.Contender, r.Check)
		}
		if r.OpsSource != modelledOps || r.EventsPerRequest == 0 {
			t.Errorf("%s/%d/%s: ops %q, %v transfers per request", r.Workload, r.Callers, r.Contender, r.OpsSource, r.EventsPerRequest)
		}
	}
}

// smallCell sets c up on a cell of one caller deciding for keys, Zipf-drawn,
// with a window of a minute; the instance is closed when the test ends.
func smallCell(t *testing.T, c *contender, keys []string) *instance {
	t.Helper()
	w := zipfWorkload(len(keys), 1.1, 3, 64, 1)
	inst, err := c.setup(context.Background(), cell{id: 1, w: w, callers: 1, window: time.Minute, keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.close)
	return inst
}
