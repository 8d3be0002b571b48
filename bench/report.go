package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

// result is one cell: a contender on a workload with a number of callers.
type result struct {
	Workload  string `json:"workload"`
	Callers   int    `json:"callers"`
	Contender string `json:"contender"`
	// NotRun says why the cell was not run; Failed, why it broke.
	NotRun string `json:"not_run,omitempty"`
	Failed string `json:"failed,omitempty"`
	// Semantics says what Expected means.
	Semantics string `json:"semantics"`

	Decisions       int64   `json:"decisions"`
	ElapsedSec      float64 `json:"elapsed_s"`
	Capped          bool    `json:"capped"` // stopped by -max-time before all decisions were made
	DecisionsPerSec float64 `json:"decisions_per_s"`
	// Rounds has the decisions/s of every round, in run order; the other
	// figures are those of the median round.
	Rounds  []float64 `json:"rounds_decisions_per_s,omitempty"`
	Latency latency   `json:"latency_ns"`
	// AllocsPerDecision is the heap allocations of this process per
	// decision (runtime.MemStats.Mallocs); for Redis and a real server it
	// covers the client side only.
	AllocsPerDecision float64 `json:"allocs_per_decision"`
	AllocsScope       string  `json:"allocs_scope"`

	Admitted   uint64      `json:"admitted"`
	Denied     uint64      `json:"denied"`
	Errors     uint64      `json:"errors"`
	FirstError string      `json:"first_error,omitempty"`
	Expected   expectation `json:"expected"`
	Check      string      `json:"check"`
	// NewKeys is, on the arrivals (churn, fresh), the keys the cell
	// decided: each was first seen in it.
	NewKeys uint64 `json:"new_keys,omitempty"`

	// Ops are the requests and events per operation during the timed part:
	// as the engine counted them (embedded), the client calls made by this
	// process (a real server, whose client batches concurrent calls further
	// into requests that cannot be seen from here), or the requests the
	// modelled client sent, concurrent calls merged (modelled rows).
	Ops       map[string]opCount `json:"ops,omitempty"`
	OpsSource string             `json:"ops_source,omitempty"`
	// EventsPerRequest is the average number of transfers per
	// create_transfers request (or call, see OpsSource).
	EventsPerRequest float64 `json:"create_transfers_events_per_request,omitempty"`
	// RequestsPerDecision counts requests (or calls) of every operation.
	RequestsPerDecision float64 `json:"requests_per_decision,omitempty"`
	// ClientOps are the calls the row's ledger.Client made during the timed
	// part (its Stats): what tblimit sent, whatever the engine.
	ClientOps map[string]opCount `json:"client_ops,omitempty"`
	// Cost is what the cell sent to TigerBeetle per admitted decision, by
	// source: Ops ("engine" or "client calls") first, then ClientOps
	// ("ledger.Client"). The last one is the one shown and compared: the
	// engine-independent count where there is one.
	Cost []cost `json:"cost_per_admitted,omitempty"`
	// ModelBusy is, for a modelled row, the share of the cell's time the
	// modelled client had a request in flight: below 1, its callers (this
	// machine's CPU) did not keep it busy.
	ModelBusy float64 `json:"model_busy_share,omitempty"`
	// ModelOverran is the share of a modelled row's requests that the
	// embedded engine took longer to apply than the model gave them (they
	// took that long): above a few percent, this machine, not the model,
	// set the pace.
	ModelOverran float64 `json:"model_overran_share,omitempty"`
	// Windows are the per-window bounds checked on the admissions
	// (-window-check): at most the limit in any window.
	Windows []windowResult `json:"window_checks,omitempty"`
	// Floor is the fewest transfers per admitted decision each kind of
	// sliding window limiter could send on this cell (tblimit and raw rows).
	Floor *floor `json:"floor,omitempty"`
	// Memory is the live heap the row holds per active key, measured once
	// per run on fresh instances of its own (probeMemory), or nil.
	Memory *memoryUse `json:"memory,omitempty"`
}

// cost is the TigerBeetle events a cell's decisions sent (or an engine
// received), per admitted decision, and the requests and events per
// decision.
type cost struct {
	Source string `json:"source"`
	// Transfers is the create_transfers events; Events, the events of
	// every operation (accounts, transfers, IDs and filters).
	Transfers            uint64  `json:"transfers"`
	Events               uint64  `json:"events"`
	TransfersPerAdmitted float64 `json:"transfers_per_admitted"`
	EventsPerAdmitted    float64 `json:"events_per_admitted"`
	// Requests is the requests (or calls) of every operation: creates,
	// lookups and queries; Accounts, the create_accounts events (accounts
	// created, users provisioned lazily on the arrivals). Per decision,
	// admitted or denied.
	Requests            uint64  `json:"requests"`
	Accounts            uint64  `json:"accounts"`
	RequestsPerDecision float64 `json:"requests_per_decision"`
	EventsPerDecision   float64 `json:"events_per_decision"`
	AccountsPerDecision float64 `json:"accounts_per_decision"`
}

type latency struct {
	Samples uint64 `json:"samples"`
	P50     int64  `json:"p50"`
	P90     int64  `json:"p90"`
	P99     int64  `json:"p99"`
	P999    int64  `json:"p999"`
}

func (r *result) fill(c *contender, cl cell, ws []*worker, elapsed time.Duration, capped bool, mallocs uint64) {
	var lat hist
	for _, w := range ws {
		r.Admitted += w.admitted
		r.Denied += w.denied
		r.Errors += w.errors
		if w.firstErr != nil && r.FirstError == "" {
			r.FirstError = w.firstErr.Error()
		}
		lat.merge(&w.lat)
	}
	r.Decisions = int64(r.Admitted + r.Denied + r.Errors)
	r.ElapsedSec = elapsed.Seconds()
	r.Capped = capped
	if elapsed > 0 {
		r.DecisionsPerSec = float64(r.Decisions) / elapsed.Seconds()
	}
	r.Latency = latency{
		Samples: lat.n,
		P50:     int64(lat.quantile(0.50)),
		P90:     int64(lat.quantile(0.90)),
		P99:     int64(lat.quantile(0.99)),
		P999:    int64(lat.quantile(0.999)),
	}
	if r.Decisions > 0 {
		r.AllocsPerDecision = float64(mallocs) / float64(r.Decisions)
	}
	r.AllocsScope = "process"
	if !c.inProcess {
		r.AllocsScope = "client side"
	}
	attempts := cl.w.attempts(ws)
	switch {
	case c.limits != nil: // the floors model one limit per key
		r.Expected = expectLimits(c.semantics, attempts, c.limits, elapsed)
	case c.semantics != bucket && !cl.w.arrivals():
		// Not on the arrivals: their keys are mostly decided once, and
		// the floors of merging and leasing say nothing there.
		r.Floor = floors(cl.w, r.Decisions, cl.callers, elapsed, cl.window, leaseLifetime, leaseUnits(cl.w.limit))
		fallthrough
	default:
		r.Expected = expect(c.semantics, attempts, cl.w.limit, elapsed, cl.window)
	}
	if cl.w.arrivals() {
		for _, a := range attempts {
			if a > 0 {
				r.NewKeys++
			}
		}
	}
	r.Check = r.Expected.check(r.Admitted)
	if r.Errors > 0 && r.FirstError != "" && r.Check == "exact" {
		r.Check = "errors"
	}
}

// diffOps returns after - before for the operations that were used.
func diffOps(before, after map[string]opCount) map[string]opCount {
	d := map[string]opCount{}
	for k, a := range after {
		if o := a.sub(before[k]); o.Requests > 0 {
			d[k] = o
		}
	}
	return d
}

// setOps sets Ops from counts taken before and after the timed part, as
// source counted them: "engine", "client calls" or modelledOps.
func (r *result) setOps(before, after map[string]opCount, source string) {
	r.Ops = diffOps(before, after)
	var reqs uint64
	for _, o := range r.Ops {
		reqs += o.Requests
	}
	r.OpsSource = source
	if ct := r.Ops["create_transfers"]; ct.Requests > 0 {
		r.EventsPerRequest = float64(ct.Events) / float64(ct.Requests)
	}
	if r.Decisions > 0 {
		r.RequestsPerDecision = float64(reqs) / float64(r.Decisions)
	}
}

// setCost computes Cost from Ops and ClientOps.
func (r *result) setCost() {
	r.Cost = nil
	add := func(source string, ops map[string]opCount) {
		if ops == nil || r.Admitted == 0 {
			return
		}
		c := cost{Source: source, Transfers: ops["create_transfers"].Events, Accounts: ops["create_accounts"].Events}
		for _, o := range ops {
			c.Events += o.Events
			c.Requests += o.Requests
		}
		c.TransfersPerAdmitted = float64(c.Transfers) / float64(r.Admitted)
		c.EventsPerAdmitted = float64(c.Events) / float64(r.Admitted)
		if r.Decisions > 0 {
			d := float64(r.Decisions)
			c.RequestsPerDecision, c.EventsPerDecision, c.AccountsPerDecision = float64(c.Requests)/d, float64(c.Events)/d, float64(c.Accounts)/d
		}
		r.Cost = append(r.Cost, c)
	}
	add(r.OpsSource, r.Ops)
	add("ledger.Client", r.ClientOps)
}

// cost returns the cost to show and compare (see result.Cost), or nil.
func (r *result) cost() *cost {
	if !r.ran() || len(r.Cost) == 0 {
		return nil
	}
	return &r.Cost[len(r.Cost)-1]
}

func (r *result) ran() bool { return r.NotRun == "" && r.Failed == "" }

func (r *result) progress() string {
	switch {
	case r.NotRun != "":
		return fmt.Sprintf("%-5s %4d callers  %-22s not run: %s", r.Workload, r.Callers, r.Contender, r.NotRun)
	case r.Failed != "":
		return fmt.Sprintf("%-5s %4d callers  %-22s FAILED: %s", r.Workload, r.Callers, r.Contender, r.Failed)
	}
	busy := ""
	if r.ModelBusy > 0 {
		busy = fmt.Sprintf(", model busy %.0f%%, engine overran %.1f%% of requests", 100*r.ModelBusy, 100*r.ModelOverran)
	}
	return fmt.Sprintf("%-5s %4d callers  %-22s %12s/s  p50 %8s  p99 %8s  admitted %d of %d (%s %d: %s)%s",
		r.Workload, r.Callers, r.Contender, thousands(r.DecisionsPerSec), dur(r.Latency.P50), dur(r.Latency.P99),
		r.Admitted, r.Decisions, r.Expected.Kind, r.Expected.Value, r.Check, busy)
}

// ratio is tblimit's decisions per second divided by another contender's,
// in one cell.
type ratio struct {
	Workload string `json:"workload"`
	Callers  int    `json:"callers"`
	Tblimit  string `json:"tblimit"`
	Peer     string `json:"peer"`
	// Ratio is the median over the rounds of the ratio within a round.
	Ratio float64 `json:"ratio"`
}

type target struct {
	Target string `json:"target"`
	Result string `json:"result"`
	// Met is "met", "missed" or "not run".
	Met string `json:"met"`
	// Cells are the figures checked, one per cell (or row), where the
	// target has them.
	Cells []targetCell `json:"cells,omitempty"`
}

// costRatio compares the transfers per admitted decision of tblimit's modes
// on one engine, workload and number of callers (what exact coalescing and
// leases are for: far fewer TigerBeetle transfers per decision).
type costRatio struct {
	Engine   string `json:"engine"` // "embedded" or "tigerbeetle"
	Workload string `json:"workload"`
	Callers  int    `json:"callers"`
	Source   string `json:"source"` // where the plain row's count comes from (see result.Cost)
	// Transfers per admitted decision of the plain recipe (tblimit/<engine>,
	// the default ledger.Client), exact coalescing (+coalesce), leases
	// (+leases) and the raw row (one pending transfer per decision, denials
	// included, no cache), 0 if not run.
	Plain float64 `json:"plain"`
	Exact float64 `json:"exact"`
	Lease float64 `json:"lease"`
	Raw   float64 `json:"raw"`
	// The ratios to each baseline, plain and raw, checked against the
	// thresholds on transfers per admitted decision (0: none).
	VsPlain baselineRatio `json:"vs_plain"`
	VsRaw   baselineRatio `json:"vs_raw"`
	// Acceptance: the thresholds are judged on this cell (acceptanceCallers).
	Acceptance bool `json:"acceptance"`
	// The floors (see floor) of exact coalescing and of leases on their
	// own rows: the fewest transfers per admitted decision any exact
	// scheme, any lease of the same τ and K, and any lease at all could
	// have sent there; 0 if not known.
	ExactFloor       float64 `json:"exact_floor,omitempty"`
	LeaseFloor       float64 `json:"lease_floor,omitempty"`
	WindowLeaseFloor float64 `json:"window_lease_floor,omitempty"`
}

// baselineRatio is exact's and lease's transfers per admitted decision over
// a baseline's, with the thresholds and whether they are "met" or "missed"
// ("" when there is no threshold or no figure).
type baselineRatio struct {
	Exact       float64 `json:"exact"`
	Lease       float64 `json:"lease"`
	ExactTarget float64 `json:"exact_target,omitempty"`
	LeaseTarget float64 `json:"lease_target,omitempty"`
	ExactMet    string  `json:"exact_met,omitempty"`
	LeaseMet    string  `json:"lease_met,omitempty"`
	// The floors over the baseline: a threshold below its floor is out of
	// reach on this cell for any implementation (under floor's model).
	ExactFloor float64 `json:"exact_floor,omitempty"`
	LeaseFloor float64 `json:"lease_floor,omitempty"`
}

// The thresholds on transfers per admitted decision, relative to
// the plain recipe, at acceptanceCallers callers.
const (
	zipfExactTarget   = 1.0 / 5
	zipfLeaseTarget   = 1.0 / 20
	hotLeaseTarget    = 1.0 / 100
	acceptanceCallers = 256
)

type meta struct {
	Date        string  `json:"date"`
	Go          string  `json:"go"`
	OS          string  `json:"os_arch"`
	CPUs        int     `json:"cpus"`
	GOMAXPROCS  int     `json:"gomaxprocs"`
	CPU         string  `json:"cpu"`
	Redis       string  `json:"redis"`
	TigerBeetle string  `json:"tigerbeetle"`
	Config      *config `json:"config"`
}

type report struct {
	Meta    meta      `json:"meta"`
	Results []*result `json:"results"`
	Ratios  []ratio   `json:"ratios"`
	Targets []target  `json:"targets"`
	// Transfers compares tblimit's modes by transfers per admitted decision.
	Transfers []costRatio `json:"transfers_per_admitted"`
	// Arrivals are the decisions/s of tblimit's rows and the raw rows on
	// churn and fresh over the same row's warm zipf cell of this run.
	Arrivals []arrivalRatio `json:"arrivals,omitempty"`

	order []string // contender names in run order
}

func newReport(cfg *config, cs []*contender, tbBin string) *report {
	rep := &report{Meta: meta{
		Date:        time.Now().UTC().Format(time.RFC3339),
		Go:          runtime.Version(),
		OS:          runtime.GOOS + "/" + runtime.GOARCH,
		CPUs:        runtime.NumCPU(),
		GOMAXPROCS:  runtime.GOMAXPROCS(0),
		CPU:         cpuModel(),
		Redis:       "not run",
		TigerBeetle: "not run",
		Config:      cfg,
	}}
	if tbBin == "" {
		rep.Meta.TigerBeetle = "not run: no binary"
	}
	for _, c := range cs {
		rep.order = append(rep.order, c.name)
		if c.name == "redis_rate" && c.notRun != "" {
			rep.Meta.Redis = "not run: " + c.notRun
		}
	}
	return rep
}

func (rep *report) add(r *result) { rep.Results = append(rep.Results, r) }

func (rep *report) failed() bool {
	for _, r := range rep.Results {
		if r.Failed != "" {
			return true
		}
	}
	return false
}

func (rep *report) find(workload string, callers int, contender string) *result {
	for _, r := range rep.Results {
		if r.Workload == workload && r.Callers == callers && r.Contender == contender && r.ran() {
			return r
		}
	}
	return nil
}

// warm reports whether workload is one whose keys are all provisioned
// before the clock starts (hot, zipf): the targets are judged on those.
func warm(workload string) bool { return !arrivalWorkload(workload) }

// finish computes the ratios and checks the targets.
func (rep *report) finish() {
	pairs := [][2]string{
		{"tblimit/embedded", "raw engine"},
		{"tblimit/embedded", "redis_rate"},
		{"tblimit/embedded", "x/time/rate"},
		{"tblimit/tigerbeetle", "raw client/tigerbeetle"},
		{"tblimit/tigerbeetle", "redis_rate"},
		{"tblimit/modelled", "raw client/modelled"},
		{"tblimit/modelled", "redis_rate"},
		{"tblimit/embedded" + twoLimitsSuffix, "x/time/rate" + twoLimitsSuffix},
		{"tblimit/embedded" + twoLimitsSuffix, "redis_rate" + twoLimitsSuffix},
		{"tblimit/modelled" + twoLimitsSuffix, "x/time/rate" + twoLimitsSuffix},
		{"tblimit/modelled" + twoLimitsSuffix, "redis_rate" + twoLimitsSuffix},
	}
	pairs = append(pairs, servePairs()...)
	pairs = append(pairs, apiPairs()...)
	for _, r := range rep.Results {
		for _, p := range pairs {
			if r.Contender != p[0] || !r.ran() {
				continue
			}
			if peer := rep.find(r.Workload, r.Callers, p[1]); peer != nil && peer.DecisionsPerSec > 0 {
				rep.Ratios = append(rep.Ratios, ratio{r.Workload, r.Callers, p[0], p[1], pairedRatio(r, peer)})
			}
		}
	}

	// tblimit on the embedded engine: 1,000,000 decisions/s at 16+ callers.
	var parts []string
	met, ran := true, false
	for _, r := range rep.Results {
		if r.Contender == "tblimit/embedded" && r.Callers >= 16 && r.ran() && warm(r.Workload) {
			ran = true
			parts = append(parts, fmt.Sprintf("%s/%d %s", r.Workload, r.Callers, thousands(r.DecisionsPerSec)))
			met = met && r.DecisionsPerSec >= 1e6
		}
	}
	rep.Targets = append(rep.Targets, target{Target: "tblimit/embedded: at least 1,000,000 decisions/s at 16+ callers",
		Result: strings.Join(parts, ", "), Met: verdict(ran, met)})

	// The real server (and its model) against the raw client: the
	// real-server targets (targets.go), below.

	// Ahead of redis_rate at 256 callers.
	parts, met, ran = nil, true, false
	for _, q := range rep.Ratios {
		if q.Peer == "redis_rate" && q.Callers == 256 && warm(q.Workload) {
			ran = true
			parts = append(parts, fmt.Sprintf("%s %s %.2fx", q.Tblimit, q.Workload, q.Ratio))
			met = met && q.Ratio > 1
		}
	}
	rep.Targets = append(rep.Targets, target{Target: "tblimit ahead of redis_rate at 256 callers",
		Result: strings.Join(parts, ", "), Met: verdict(ran, met)})

	rep.transfers()
	rep.realServerTargets()
	rep.arrivals()
}

// transfers compares the transfers per admitted decision of exact coalescing
// and leases with two baselines, and checks the thresholds on transfers per
// admitted decision at 256 callers: the plain recipe as tblimit runs it
// (tblimit/<engine>, whose drained-user cache already denies most denials
// without a transfer), and the raw row (one pending transfer per decision,
// the recipe as DESIGN.md states it).
func (rep *report) transfers() {
	rep.Transfers = nil
	engines := []struct{ name, raw string }{{"embedded", "raw engine"}, {"tigerbeetle", "raw client/tigerbeetle"},
		{"modelled", "raw client/modelled"}}
	for _, e := range engines {
		plainName := "tblimit/" + e.name
		get := func(workload string, callers int, name string) float64 {
			if r := rep.find(workload, callers, name); r != nil && r.cost() != nil {
				return r.cost().TransfersPerAdmitted
			}
			return 0
		}
		type tally struct {
			parts     map[bool][]string
			met, ran  bool
			baseline  string
			ratioName string
		}
		tallies := []*tally{
			{parts: map[bool][]string{}, met: true, baseline: plainName, ratioName: "plain"},
			{parts: map[bool][]string{}, met: true, baseline: e.raw, ratioName: "raw"},
		}
		for _, p := range rep.Results {
			pc := p.cost()
			if p.Contender != plainName || pc == nil {
				continue
			}
			cr := costRatio{Engine: e.name, Workload: p.Workload, Callers: p.Callers, Source: pc.Source,
				Plain: pc.TransfersPerAdmitted, Acceptance: p.Callers == acceptanceCallers}
			cr.Exact, cr.Lease = get(p.Workload, p.Callers, plainName+"+coalesce"), get(p.Workload, p.Callers, plainName+"+leases")
			cr.Raw = get(p.Workload, p.Callers, e.raw)
			if r := rep.find(p.Workload, p.Callers, plainName+"+coalesce"); r != nil && r.Floor != nil {
				cr.ExactFloor = r.Floor.Exact
			}
			if r := rep.find(p.Workload, p.Callers, plainName+"+leases"); r != nil && r.Floor != nil {
				cr.LeaseFloor, cr.WindowLeaseFloor = r.Floor.Lease, r.Floor.WindowLease
			}
			for i, base := range []float64{cr.Plain, cr.Raw} {
				t := tallies[i]
				var br baselineRatio
				if base > 0 {
					br.Exact, br.Lease = cr.Exact/base, cr.Lease/base
					br.ExactFloor, br.LeaseFloor = cr.ExactFloor/base, cr.LeaseFloor/base
				}
				switch p.Workload {
				case "zipf":
					br.ExactTarget, br.LeaseTarget = zipfExactTarget, zipfLeaseTarget
				case "hot":
					br.LeaseTarget = hotLeaseTarget
				}
				judge := func(v, target, floor float64, what string) string {
					if target == 0 || v == 0 {
						return ""
					}
					if cr.Acceptance {
						t.ran = true
						t.met = t.met && v <= target
						why := ""
						if floor > target {
							why = fmt.Sprintf("; floor %.3g", floor)
						}
						t.parts[v <= target] = append(t.parts[v <= target],
							fmt.Sprintf("%s %s/%s %.3g (≤ %s: %s%s)", p.Workload, what, t.ratioName, v, fraction(target), verdict(true, v <= target), why))
					}
					return verdict(true, v <= target)
				}
				br.ExactMet = judge(br.Exact, br.ExactTarget, br.ExactFloor, "exact")
				br.LeaseMet = judge(br.Lease, br.LeaseTarget, br.LeaseFloor, "lease")
				if i == 0 {
					cr.VsPlain = br
				} else {
					cr.VsRaw = br
				}
			}
			rep.Transfers = append(rep.Transfers, cr)
		}
		for _, t := range tallies {
			rep.Targets = append(rep.Targets, target{Target: fmt.Sprintf("transfers, %s, %d callers, tr/adm over %s's: zipf exact ≤ 1/5, "+
				"zipf lease ≤ 1/20, hot lease ≤ 1/100", e.name, acceptanceCallers, t.baseline),
				Result: strings.Join(append(t.parts[false], t.parts[true]...), ", "), Met: verdict(t.ran, t.met)})
		}
	}
}

// fraction writes a threshold such as 0.2 as "1/5".
func fraction(t float64) string {
	if t > 0 && t < 1 {
		return fmt.Sprintf("1/%.0f", 1/t)
	}
	return fmt.Sprintf("%.3g", t)
}

func verdict(ran, met bool) string {
	switch {
	case !ran:
		return "not run"
	case met:
		return "met"
	}
	return "missed"
}

// loadReport reads a bench.json and computes its ratios and targets again.
func loadReport(path string) (*report, error) {
	js, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rep := &report{}
	if err := json.Unmarshal(js, rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg := rep.Meta.Config
	if cfg == nil || len(rep.Results) == 0 {
		return nil, fmt.Errorf("%s: no results", path)
	}
	cfg.MaxTime = time.Duration(cfg.MaxTimeSec * float64(time.Second))
	cfg.Window = time.Duration(cfg.WindowSec * float64(time.Second))
	for _, r := range rep.Results {
		if !slices.Contains(rep.order, r.Contender) {
			rep.order = append(rep.order, r.Contender)
		}
	}
	rep.Ratios, rep.Targets = nil, nil
	rep.finish()
	return rep, nil
}

// name is the base name of the report's files: -name, else "bench", or
// "sustained" for a -sustained run.
func (rep *report) name() string {
	if n := rep.Meta.Config.Name; n != "" {
		return n
	}
	if rep.Meta.Config.Sustained {
		return "sustained"
	}
	return "bench"
}

// write writes NAME.txt, NAME.json, NAME.png (decisions/s) and
// NAME-transfers.png (transfers per admitted decision) into dir, NAME being
// rep.name(), and the text to out.
func (rep *report) write(dir string, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(dir, rep.name())
	var txt bytes.Buffer
	rep.text(&txt)
	if err := os.WriteFile(base+".txt", txt.Bytes(), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := rep.chart(base + ".png"); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if err := rep.transfersChart(base + "-transfers.png"); err != nil {
		return fmt.Errorf("transfers chart: %w", err)
	}
	_, err = out.Write(txt.Bytes())
	return err
}

// text writes the table, the notes, the summary of transfers per admitted
// decision and the targets.
func (rep *report) text(w io.Writer) {
	m, cfg := rep.Meta, rep.Meta.Config
	rev := ""
	if cfg.Rev != "" {
		rev = " " + cfg.Rev
	}
	fmt.Fprintf(w, "tblimit%s bench, %s: %s, %d CPUs (GOMAXPROCS %d), %s, %s\n", rev, m.Date, m.OS, m.CPUs, m.GOMAXPROCS, m.CPU, m.Go)
	fmt.Fprintf(w, "redis: %s; tigerbeetle: %s\n", m.Redis, m.TigerBeetle)
	if cfg.Sustained {
		fmt.Fprintf(w, "sustained: cells of %v each (%.3g windows), median of %d rounds; window %v; hot: 1 user, limit %d; zipf: %d users (s=%.2g), limit %d each\n\n",
			cfg.MaxTime, cfg.MaxTime.Seconds()/cfg.Window.Seconds(), cfg.Rounds, cfg.Window, cfg.HotLimit, cfg.Users, cfg.ZipfS, cfg.ZipfLimit)
	} else {
		fmt.Fprintf(w, "cells: %s decisions or %v each, median of %d rounds; window %v; hot: 1 user, limit %d; zipf: %d users (s=%.2g), limit %d each\n\n",
			thousands(float64(cfg.Decisions)), cfg.MaxTime, cfg.Rounds, cfg.Window, cfg.HotLimit, cfg.Users, cfg.ZipfS, cfg.ZipfLimit)
	}
	if slices.ContainsFunc(cfg.Workloads, arrivalWorkload) {
		fmt.Fprintf(w, "arrivals, nothing provisioned before the clock starts: churn: Zipf s=%.2g over %s keys; fresh: a new key per decision; limit %d each\n\n",
			cfg.ZipfS, thousands(float64(cfg.ChurnKeys)), cfg.ZipfLimit)
	}

	windows := slices.ContainsFunc(rep.Results, func(r *result) bool { return len(r.Windows) > 0 })
	cols := []string{"workload", "callers", "contender", "decisions/s", "p50", "p99", "allocs/dec", "denied", "admitted", "expected", "check"}
	if windows {
		cols = append(cols, "max/win")
	}
	cols = append(cols, "ev/req", "tr/adm", "ev/adm", "req/dec", "acc/dec", "tblimit÷")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	last := ""
	for _, r := range rep.Results {
		key := fmt.Sprintf("%s/%d", r.Workload, r.Callers)
		if last != "" && key != last {
			fmt.Fprintln(tw, strings.Repeat("\t", len(cols)))
		}
		last = key
		if !r.ran() {
			why := "not run: " + r.NotRun
			if r.Failed != "" {
				why = "FAILED: " + r.Failed
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s%s\n", r.Workload, r.Callers, r.Contender, short(why, 72), strings.Repeat("\t", len(cols)-3))
			continue
		}
		dps := thousands(r.DecisionsPerSec)
		if r.Capped && !cfg.Sustained {
			dps += "*"
		}
		allocs := fmt.Sprintf("%.1f", r.AllocsPerDecision)
		if r.AllocsScope != "process" {
			allocs += "c"
		}
		exp := thousands(float64(r.Expected.Value))
		if r.Expected.Kind != "exact" {
			exp = "≤" + exp
		}
		evreq := "—"
		if (r.OpsSource == "engine" || r.OpsSource == modelledOps) && r.EventsPerRequest > 0 {
			evreq = fmt.Sprintf("%.1f", r.EventsPerRequest)
		}
		denied := "—"
		if r.Decisions > 0 {
			denied = fmt.Sprintf("%.0f%%", 100*float64(r.Denied)/float64(r.Decisions))
		}
		trAdm, evAdm, reqDec, accDec := "—", "—", "—", "—"
		if c := r.cost(); c != nil {
			trAdm, evAdm = perAdmitted(c.TransfersPerAdmitted), perAdmitted(c.EventsPerAdmitted)
			reqDec, accDec = perAdmitted(c.RequestsPerDecision), perAdmitted(c.AccountsPerDecision)
			if c.Accounts == 0 {
				accDec = "0"
			}
		}
		row := []string{r.Workload, fmt.Sprint(r.Callers), r.Contender, dps, dur(r.Latency.P50), dur(r.Latency.P99), allocs, denied,
			thousands(float64(r.Admitted)), exp, r.Check}
		if windows {
			row = append(row, windowText(r.Windows))
		}
		row = append(row, evreq, trAdm, evAdm, reqDec, accDec, rep.ratioText(r))
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()

	star := " (* = stopped by the time cap)"
	if cfg.Sustained {
		star = " (every cell runs for its full time)"
	}
	expected := `expected: tblimit and the raw rows keep a sliding window log (every unit returns one window
  after it was taken): with cells shorter than the window each key admits exactly
  min(attempts, limit), and "exact" means admitted == expected.`
	if cfg.MaxTime >= cfg.Window {
		expected = `expected: tblimit and the raw rows keep a sliding window log (every unit returns one window
  after it was taken): over a cell of E seconds each key admits at most
  min(attempts, limit*(floor(E/window)+1)); "ok" means within that bound.`
	}
	fmt.Fprintln(w, `
decisions/s: decisions made / wall time, all callers together`+star+`.
p50, p99: latency of one decision (one in `+fmt.Sprint(cfg.Sample)+` timed).
allocs/dec: heap allocations of this process per decision (c = client side only).
denied: share of the decisions that were denials (tblimit's denials cost more than its admissions).
`+expected+` redis_rate (GCRA) and
  x/time/rate (token bucket) get burst = limit and rate = limit per window, so each key may
  admit up to limit + limit*elapsed/window: "ok" means within that bound; OVER would be wrong.`)
	if windows {
		fmt.Fprintln(w, `max/win: the most admissions of one key seen within one window (calls that began and
  returned inside it; leases: within window − τ, τ = `+leaseLifetime.String()+`) / the limit: the check
  "at most limit in any window", OVER if exceeded (the rows of a bucket are not checked).
  Every decision of every row is timed for it (two clock reads).`)
	}
	fmt.Fprintln(w, `ev/req: transfers per create_transfers request as the embedded engine counted them, or as the
  modelled client sent them (concurrent calls merged into one request, as a real client does).
tr/adm, ev/adm: TigerBeetle transfers (create_transfers events), and events of every operation,
  per admitted decision: what the row's ledger.Client sent (its Stats) for tblimit, what the
  engine received for the raw engine, what the raw client sent on a real server or the model.
req/dec, acc/dec: requests (calls of a ledger.Client or of the raw client on a real server;
  requests the engine or the model received for the raw rows) of every operation (creates,
  lookups, queries), and accounts created (create_accounts events), per decision, from the
  same source as tr/adm.
tblimit÷: tblimit's decisions/s over this row's (the median of the per-round ratios), from
  tblimit/tigerbeetle for the rows on a real server, tblimit/modelled for the rows on the model
  of one (ledger/simnet, RealServer0179), tblimit/embedded for the others; for the pay rows,
  tblimit pay/<engine> (ledger.Client.Pay in process).`)
	rep.transfersText(w)
	rep.arrivalsText(w)
	rep.twoLimitsText(w)
	rep.serveText(w)
	rep.apiText(w)
	rep.memoryText(w)
	fmt.Fprintln(w, "\ntargets:")
	for _, t := range rep.Targets {
		fmt.Fprintf(w, "  %-7s %s: %s\n", strings.ToUpper(t.Met), t.Target, orDash(t.Result))
	}
}

// transfersText writes the summary of the transfers per admitted decision: transfers per admitted decision of
// each mode, and the ratios to the two baselines with their thresholds.
func (rep *report) transfersText(w io.Writer) {
	if len(rep.Transfers) == 0 {
		return
	}
	fmt.Fprintln(w, "\ntransfers per admitted decision (tr/adm), exact coalescing and leases vs the plain recipe and vs raw")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "engine\tworkload\tcallers\tplain\texact\tfloor\tlease\tfloor\tany lease\traw\t"+
		"exact/plain\t\tlease/plain\t\texact/raw\t\tlease/raw\t\t")
	for _, c := range rep.Transfers {
		mark := ""
		if c.Acceptance {
			mark = " †"
		}
		cells := []string{c.Engine, c.Workload, fmt.Sprint(c.Callers) + mark,
			perAdmitted(c.Plain), perAdmitted(c.Exact), perAdmitted(c.ExactFloor),
			perAdmitted(c.Lease), perAdmitted(c.LeaseFloor), perAdmitted(c.WindowLeaseFloor), perAdmitted(c.Raw)}
		for _, br := range []baselineRatio{c.VsPlain, c.VsRaw} {
			cells = append(cells, costRatioText(br.Exact), targetText(br.ExactTarget, br.ExactMet),
				costRatioText(br.Lease), targetText(br.LeaseTarget, br.LeaseMet))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintln(w, `plain, exact, lease: tr/adm of tblimit/<engine>, +coalesce and +leases (what their ledger.Client
  sent); raw: tr/adm of the raw row, one pending transfer per decision, denials included (the
  recipe as DESIGN.md states it, without the drained-user cache that tblimit's plain client
  has too). Thresholds: zipf exact ≤ 1/5, zipf lease ≤ 1/20, hot lease ≤ 1/100; † = the cells
  they are judged on (256 callers).
floor: the fewest tr/adm any limiter of that kind could send on that row's cell, knowing the
  future (bench/floor.go): exact merges only decisions that can be in flight together (any two
  fewer than 16 × callers apart in the sequence); lease, leases of the row's τ and K; any lease,
  leases of the whole limit held for a whole window. The lease floors are exact for the
  modelled arrival times; the exact floor is a model of the closed loop (a caller stalled
  far behind the others could merge more), not a proof.`)
}

// perAdmitted formats a per-admitted figure with three significant digits.
func perAdmitted(v float64) string {
	switch {
	case v == 0:
		return "—"
	case v >= 1000:
		return thousands(v)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func costRatioText(ratio float64) string {
	if ratio == 0 {
		return "—"
	}
	return fmt.Sprintf("%.3g", ratio)
}

// targetText is a threshold and its verdict: "≤ 1/5 met".
func targetText(t float64, met string) string {
	if t == 0 || met == "" {
		return ""
	}
	return "≤ " + fraction(t) + " " + met
}

// windowText shows the tightest window check: most seen / bound.
func windowText(ws []windowResult) string {
	if len(ws) == 0 {
		return "—"
	}
	best := ws[0]
	for _, wr := range ws[1:] {
		if float64(wr.MaxSeen)/float64(wr.Bound) > float64(best.MaxSeen)/float64(best.Bound) {
			best = wr
		}
	}
	return fmt.Sprintf("%s/%s", thousands(float64(best.MaxSeen)), thousands(float64(best.Bound)))
}

func (rep *report) ratioText(r *result) string {
	base := "tblimit/embedded"
	switch {
	case strings.Contains(r.Contender, "/tigerbeetle"):
		base = "tblimit/tigerbeetle"
	case strings.Contains(r.Contender, "/modelled"):
		base = "tblimit/modelled"
	}
	if strings.HasSuffix(r.Contender, twoLimitsSuffix) {
		base += twoLimitsSuffix
	}
	if strings.Contains(r.Contender, " pay/") {
		base = strings.Replace(base, "tblimit/", "tblimit pay/", 1) // a payment's baseline is a payment
	}
	b := rep.find(r.Workload, r.Callers, base)
	if b == nil || r.DecisionsPerSec == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", pairedRatio(b, r))
}

// pairedRatio is a's decisions/s over b's: the median of the ratios of the
// rounds, which ran seconds apart (so a slow moment of a shared machine
// slows both), or the ratio of the medians when the rounds do not pair up.
func pairedRatio(a, b *result) float64 {
	if len(a.Rounds) == 0 || len(a.Rounds) != len(b.Rounds) {
		return a.DecisionsPerSec / b.DecisionsPerSec
	}
	rs := make([]float64, 0, len(a.Rounds))
	for i := range a.Rounds {
		if b.Rounds[i] > 0 {
			rs = append(rs, a.Rounds[i]/b.Rounds[i])
		}
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	return rs[(len(rs)-1)/2]
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// thousands formats v rounded, with thousands separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// dur formats nanoseconds with three significant digits.
func dur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%.3gµs", float64(ns)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.3gs", float64(ns)/1e9)
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func serverVersion(bin string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if err != nil || line == "" {
		return bin + " (no --development)"
	}
	return line + " (no --development)"
}

func redisVersion(addr, fallback string) string {
	if addr == "" {
		return fallback
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return fallback
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return "redis " + v + " at " + addr
		}
	}
	return fallback
}
