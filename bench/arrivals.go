package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// The arrivals: keys as a gateway sees them, most of them for the first
// time. On churn (Zipf over -churn-keys keys) and fresh (a new key per
// decision) nothing is provisioned, created or stored for any key before
// the clock starts: tblimit's resources are Lazy (a key is provisioned by
// its first decision), the raw rows create a key's account and credit on
// its first decision (rawLazySetup), and redis_rate, gubernator and
// x/time/rate need nothing per key. Each cell starts from nothing, as
// every cell does (a fresh engine, ledger, domain, daemon or key prefix).

// arrivalRatio is a row's decisions/s on an arrivals cell over its
// decisions/s on the warm zipf cell of the same callers, in the same run.
type arrivalRatio struct {
	Contender string `json:"contender"`
	Workload  string `json:"workload"` // churn or fresh
	Callers   int    `json:"callers"`
	// DecisionsPerSec is the arrivals cell's; Baseline, the zipf cell's.
	DecisionsPerSec float64 `json:"decisions_per_s"`
	Baseline        float64 `json:"zipf_decisions_per_s"`
	Ratio           float64 `json:"ratio"`
	// NewKeysPerDecision is the share of the cell's decisions that were a
	// key's first.
	NewKeysPerDecision float64 `json:"new_keys_per_decision"`
	// RequestsPerDecision is the arrivals cell's, and the zipf cell's (see
	// cost), or 0 if not counted.
	RequestsPerDecision         float64 `json:"requests_per_decision,omitempty"`
	BaselineRequestsPerDecision float64 `json:"zipf_requests_per_decision,omitempty"`
}

// arrivalRow reports whether a contender's arrivals are compared with its
// warm cells: tblimit's rows (in process and served) and the raw rows,
// their floor.
func arrivalRow(name string) bool {
	return strings.HasPrefix(name, "tblimit") || strings.HasPrefix(name, "raw ")
}

// arrivals computes rep.Arrivals: for each tblimit or raw row that ran on
// churn or fresh and on zipf with the same callers in this run, the ratio
// of their decisions/s (the medians': the cells ran minutes apart, so the
// rounds do not pair up).
func (rep *report) arrivals() {
	rep.Arrivals = nil
	for _, r := range rep.Results {
		if !arrivalWorkload(r.Workload) || !arrivalRow(r.Contender) || !r.ran() || r.Decisions == 0 {
			continue
		}
		z := rep.find("zipf", r.Callers, r.Contender)
		if z == nil || z.DecisionsPerSec == 0 {
			continue
		}
		a := arrivalRatio{Contender: r.Contender, Workload: r.Workload, Callers: r.Callers,
			DecisionsPerSec: r.DecisionsPerSec, Baseline: z.DecisionsPerSec, Ratio: r.DecisionsPerSec / z.DecisionsPerSec,
			NewKeysPerDecision: float64(r.NewKeys) / float64(r.Decisions)}
		if c := r.cost(); c != nil {
			a.RequestsPerDecision = c.RequestsPerDecision
		}
		if c := z.cost(); c != nil {
			a.BaselineRequestsPerDecision = c.RequestsPerDecision
		}
		rep.Arrivals = append(rep.Arrivals, a)
	}
}

// arrivalsText writes rep.Arrivals: one line per row and callers, churn
// and fresh side by side.
func (rep *report) arrivalsText(w io.Writer) {
	if len(rep.Arrivals) == 0 {
		return
	}
	type line struct {
		contender string
		callers   int
		zipf, req float64
		by        map[string]arrivalRatio
	}
	var lines []*line
	for _, a := range rep.Arrivals {
		var l *line
		for _, m := range lines {
			if m.contender == a.Contender && m.callers == a.Callers {
				l = m
			}
		}
		if l == nil {
			l = &line{contender: a.Contender, callers: a.Callers, zipf: a.Baseline, req: a.BaselineRequestsPerDecision, by: map[string]arrivalRatio{}}
			lines = append(lines, l)
		}
		l.by[a.Workload] = a
	}
	fmt.Fprintln(w, "\narrivals: decisions/s on keys first seen in the cell (churn, fresh) over the same row's warm zipf cell")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tcallers\tzipf/s\treq/dec\tchurn/s\tnew/dec\treq/dec\tchurn÷zipf\tfresh/s\treq/dec\tfresh÷zipf\t")
	for _, l := range lines {
		cells := []string{l.contender, fmt.Sprint(l.callers), thousands(l.zipf), perAdmitted(l.req)}
		for _, wl := range []string{"churn", "fresh"} {
			a, ok := l.by[wl]
			switch {
			case !ok && wl == "churn":
				cells = append(cells, "—", "—", "—", "—")
			case !ok:
				cells = append(cells, "—", "—", "—")
			case wl == "churn":
				cells = append(cells, thousands(a.DecisionsPerSec), fmt.Sprintf("%.2f", a.NewKeysPerDecision), perAdmitted(a.RequestsPerDecision), fmt.Sprintf("%.2f", a.Ratio))
			default:
				cells = append(cells, thousands(a.DecisionsPerSec), perAdmitted(a.RequestsPerDecision), fmt.Sprintf("%.2f", a.Ratio))
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintln(w, `zipf: every user provisioned before the clock starts; churn and fresh: nothing provisioned,
  tblimit's users provisioned lazily by their first decision, the raw rows creating a key's
  account, then its credit and hold, on its first decision. new/dec: share of the churn cell's
  decisions that were a key's first (fresh: all). req/dec as in the table. The ratio is of the
  medians of cells run in this invocation, minutes apart on the same machine.`)
}
