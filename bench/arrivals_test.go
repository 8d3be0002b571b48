package main

import (
	"context"
	"io"
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
