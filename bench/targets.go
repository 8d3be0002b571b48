package main

import (
	"fmt"
	"strings"
)

// targetCell is one cell's figure for a target.
type targetCell struct {
	Workload  string  `json:"workload"`
	Callers   int     `json:"callers"`
	Contender string  `json:"contender,omitempty"` // for targets over several rows of a cell
	Value     float64 `json:"value"`
	// Bound is the target's threshold; Met whether Value is on the right side.
	Bound float64 `json:"bound,omitempty"`
	Met   bool    `json:"met"`
}

// The thresholds of the real-server targets (one round trip per decision
// on a real server), checked on the real-server rows and on the rows of the
// model of one.
const (
	targetRawShare     = 0.9 // plain recipe / raw client, decisions/s, 16+ callers
	targetRedisBurst   = 1.0 // plain recipe / redis_rate, burst cells at 16+ callers: ahead
	targetRedisSustain = 1.5 // plain recipe / redis_rate, sustained zipf at 256 callers
	targetEventsPerAdm = 1.1 // events per admitted decision, zipf burst, plain
	targetP50Ratio     = 1.2 // p50 at one caller, plain / raw client
)

// realServerTargets checks the real-server targets on each engine that has
// a raw client row: the real server (tigerbeetle) and its model (modelled).
// A burst report checks the burst targets, a sustained one the sustained
// targets; all but exactness on the warm workloads only (hot, zipf).
func (rep *report) realServerTargets() {
	sustained := rep.Meta.Config != nil && rep.Meta.Config.Sustained
	set := "burst"
	if sustained {
		set = "sustained"
	}
	for _, e := range []string{"modelled", "tigerbeetle"} {
		plain, raw := "tblimit/"+e, "raw client/"+e
		name := func(s string) string { return fmt.Sprintf("real server, %s, %s: %s", e, set, s) }

		shareCells := func(r *result) bool {
			return r.Callers >= 16 && warm(r.Workload) && (!sustained || r.Workload == "zipf")
		}
		what := "hot and zipf"
		if sustained {
			what = "zipf"
		}
		rep.Targets = append(rep.Targets, rep.pairTarget(
			name(fmt.Sprintf("plain ≥ %.0f%% of the raw client's decisions/s at 16+ callers (%s)", 100*targetRawShare, what)),
			plain, raw, shareCells, func(a, b *result) float64 { return pairedRatio(a, b) }, targetRawShare, false, percent))

		if sustained {
			rep.Targets = append(rep.Targets, rep.pairTarget(
				name(fmt.Sprintf("plain ≥ %.1f× redis_rate at 256 callers (zipf)", targetRedisSustain)),
				plain, "redis_rate", func(r *result) bool { return r.Callers == 256 && r.Workload == "zipf" },
				func(a, b *result) float64 { return pairedRatio(a, b) }, targetRedisSustain, false, times))
		} else {
			rep.Targets = append(rep.Targets, rep.pairTarget(
				name("plain ahead of redis_rate in every cell at 16+ callers"),
				plain, "redis_rate", func(r *result) bool { return r.Callers >= 16 && warm(r.Workload) },
				func(a, b *result) float64 { return pairedRatio(a, b) }, targetRedisBurst, false, times))
			rep.Targets = append(rep.Targets, rep.pairTarget(
				name(fmt.Sprintf("plain ≤ %.1f events per admitted decision (zipf)", targetEventsPerAdm)),
				plain, "", func(r *result) bool { return r.Workload == "zipf" },
				func(a, _ *result) float64 {
					if c := a.cost(); c != nil {
						return c.EventsPerAdmitted
					}
					return 0
				}, targetEventsPerAdm, true, plainFigure))
		}
		rep.Targets = append(rep.Targets, rep.pairTarget(
			name(fmt.Sprintf("plain p50 at one caller ≤ %.1f× the raw client's", targetP50Ratio)),
			plain, raw, func(r *result) bool { return r.Callers == 1 && warm(r.Workload) },
			func(a, b *result) float64 {
				if b.Latency.P50 == 0 {
					return 0
				}
				return float64(a.Latency.P50) / float64(b.Latency.P50)
			}, targetP50Ratio, true, times))
		rep.Targets = append(rep.Targets, rep.exactTarget(name("every sliding window row exact (or within its bound), no window over"), e))
	}
}

// pairTarget checks value(plain row, peer row) against bound (at most bound
// if atMost, else at least) in every cell whose plain row ran and passes
// cells. With peer "", value gets the plain row twice.
func (rep *report) pairTarget(title, plain, peer string, cells func(*result) bool,
	value func(a, b *result) float64, bound float64, atMost bool, format func(float64) string) target {
	t := target{Target: title}
	var parts []string
	met := true
	for _, r := range rep.Results {
		if r.Contender != plain || !r.ran() || !cells(r) {
			continue
		}
		p := r
		if peer != "" {
			if p = rep.find(r.Workload, r.Callers, peer); p == nil {
				continue
			}
		}
		v := value(r, p)
		if v == 0 {
			continue
		}
		ok := v >= bound
		if atMost {
			ok = v <= bound
		}
		met = met && ok
		t.Cells = append(t.Cells, targetCell{Workload: r.Workload, Callers: r.Callers, Value: v, Bound: bound, Met: ok})
		parts = append(parts, fmt.Sprintf("%s/%d %s", r.Workload, r.Callers, format(v)))
	}
	t.Result = strings.Join(parts, ", ")
	t.Met = verdict(len(t.Cells) > 0, met)
	return t
}

// exactTarget checks that every sliding window row of engine e that ran
// (tblimit's modes and the raw client) kept its promise: admitted exactly
// what a sliding window log admits (or within the bound stated), and no key
// over its limit in any window.
func (rep *report) exactTarget(title, e string) target {
	t := target{Target: title}
	var bad []string
	n := 0
	for _, r := range rep.Results {
		if !r.ran() || (!strings.HasPrefix(r.Contender, "tblimit/"+e) && r.Contender != "raw client/"+e) {
			continue
		}
		ok := r.Check == "exact" || r.Check == "ok"
		for _, w := range r.Windows {
			ok = ok && w.Check != "OVER"
		}
		n++
		t.Cells = append(t.Cells, targetCell{Workload: r.Workload, Callers: r.Callers, Contender: r.Contender, Met: ok})
		if !ok {
			bad = append(bad, fmt.Sprintf("%s/%d %s %s", r.Workload, r.Callers, r.Contender, r.Check))
		}
	}
	t.Result = fmt.Sprintf("%d of %d rows", n-len(bad), n)
	if len(bad) > 0 {
		t.Result += "; not: " + strings.Join(bad, ", ")
	}
	t.Met = verdict(n > 0, len(bad) == 0)
	if n == 0 {
		t.Result = ""
	}
	return t
}

func percent(v float64) string     { return fmt.Sprintf("%.0f%%", 100*v) }
func times(v float64) string       { return fmt.Sprintf("%.2fx", v) }
func plainFigure(v float64) string { return fmt.Sprintf("%.3g", v) }
