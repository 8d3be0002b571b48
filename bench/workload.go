package main

import (
	"fmt"
	"math/rand"
	"time"
)

// workload is the key sequence of a cell and the limit every key has.
type workload struct {
	name  string // "hot", "zipf", "churn" or "fresh"
	users int    // distinct keys (churn: in its sequence; fresh: one per decision)
	limit uint64 // units per window for each key
	seq   []int32
	mask  int64
	// universe is, for churn, the keys its Zipf distribution draws from.
	universe int
	// s is the Zipf exponent of zipf and churn.
	s float64
}

// The workloads the harness knows: hot and zipf are warm (every key is
// provisioned before the clock starts); churn and fresh are arrivals
// (nothing is provisioned: keys come as the traffic brings them).
var workloadNames = []string{"hot", "zipf", "churn", "fresh"}

// arrivals reports whether w's keys are first seen in the cell: nothing
// is provisioned, created or stored for them before the clock starts.
func (w *workload) arrivals() bool { return arrivalWorkload(w.name) }

// arrivalWorkload reports whether the workload named name is churn or fresh.
func arrivalWorkload(name string) bool { return name == "churn" || name == "fresh" }

// hotWorkload is one user taking every decision.
func hotWorkload(limit uint64) *workload {
	return &workload{name: "hot", users: 1, limit: limit}
}

// zipfWorkload draws n keys out of users with a Zipf distribution of
// exponent s (key 0 is the most frequent: P(k) ∝ 1/(1+k)^s), from seed, so
// that every contender sees the same sequence. It keeps a power-of-two
// sequence of at least n keys (at most 8Mi; longer cells wrap around).
func zipfWorkload(users int, s float64, limit uint64, n int64, seed int64) *workload {
	size := int64(1 << 10)
	for size < n && size < 1<<23 {
		size <<= 1
	}
	z := rand.NewZipf(rand.New(rand.NewSource(seed)), s, 1, uint64(users-1))
	seq := make([]int32, size)
	for i := range seq {
		seq[i] = int32(z.Uint64())
	}
	return &workload{name: "zipf", users: users, limit: limit, seq: seq, mask: size - 1, s: s}
}

// churnWorkload is zipfWorkload over universe keys with nothing provisioned
// (see arrivals), its keys numbered again in the order they first appear
// in the sequence: 0, 1, 2... A new number for the same key changes nothing
// a limiter sees (every cell starts from nothing), and keeps what is per
// key (the key names, the attempts counted) to the keys the sequence holds,
// about a fifth of its length at s = 1.1 over 10,000,000 keys, not to the
// whole universe.
func churnWorkload(universe int, s float64, limit uint64, n int64, seed int64) *workload {
	w := zipfWorkload(universe, s, limit, n, seed)
	number := make(map[int32]int32, len(w.seq)/4)
	for i, k := range w.seq {
		m, ok := number[k]
		if !ok {
			m = int32(len(number))
			number[k] = m
		}
		w.seq[i] = m
	}
	w.name, w.users, w.universe = "churn", len(number), universe
	return w
}

// freshWorkload is a new key for every one of n decisions: the key of
// decision i is i, never seen before, and with any limit of 1 or more
// each admits exactly its one attempt (see arrivals).
func freshWorkload(limit uint64, n int64) *workload {
	return &workload{name: "fresh", users: int(n), limit: limit}
}

// key returns the key of decision i.
func (w *workload) key(i int64) int {
	switch {
	case w.seq != nil:
		return int(w.seq[i&w.mask])
	case w.name == "fresh":
		return int(i)
	}
	return 0
}

func (w *workload) String() string {
	switch w.name {
	case "hot":
		return fmt.Sprintf("hot: 1 user, limit %d per window", w.limit)
	case "churn":
		return fmt.Sprintf("churn: Zipf s=%.2g over %d keys, none provisioned (%d distinct in a sequence of %d), limit %d per window each",
			w.s, w.universe, w.users, len(w.seq), w.limit)
	case "fresh":
		return fmt.Sprintf("fresh: a new key per decision (up to %d), none provisioned, limit %d per window each", w.users, w.limit)
	}
	return fmt.Sprintf("zipf: %d users, limit %d per window each", w.users, w.limit)
}

// attempts counts the decisions each key got, from the spans the workers made.
func (w *workload) attempts(ws []*worker) []uint64 {
	a := make([]uint64, w.users)
	for _, wk := range ws {
		for _, sp := range wk.spans {
			switch {
			case w.seq != nil:
				for i := sp.start; i < sp.end; i++ {
					a[w.seq[i&w.mask]]++
				}
			case w.name == "fresh":
				for i := sp.start; i < sp.end; i++ {
					a[i]++
				}
			default:
				a[0] += uint64(sp.end - sp.start)
			}
		}
	}
	return a
}

// Semantics of a limiter: what "expected" means for its admitted count.
type semantics int

const (
	// slidingLog: tblimit and raw pending transfers. At most limit units in
	// any interval of one window; within a cell shorter than the window
	// nothing returns, so each key admits exactly min(attempts, limit).
	slidingLog semantics = iota
	// slidingBound: tblimit with leases: every unit of a lease returns one
	// window after the lease was taken, so within a cell shorter than the
	// window each key admits at most min(attempts, limit) (a lease may hold
	// back units at the end of the cell); over longer cells, at most limit
	// in any interval of window − τ (see contender.windowBounds).
	slidingBound
	// bucket: a token bucket (x/time/rate) or GCRA (redis_rate) with burst
	// = limit and rate = limit per window, starting full: each key admits
	// at most min(attempts, limit + limit*elapsed/window), and about that
	// many when it is saturated.
	bucket
)

func (s semantics) String() string {
	switch s {
	case slidingLog:
		return "sliding window log"
	case slidingBound:
		return "sliding window log, leased"
	}
	return "token bucket / GCRA"
}

// expectation is what a limiter of semantics s should have admitted.
type expectation struct {
	Value uint64 `json:"value"`
	// Kind is "exact" (admitted must equal Value) or "at most" (admitted
	// must not exceed Value; a saturated bucket comes close to it).
	Kind string `json:"kind"`
	// Slack is how far above Value the admitted count may go without
	// being wrong: the rounding of a bucket's refill, one unit per
	// saturated key.
	Slack uint64 `json:"slack"`
}

func expect(s semantics, attempts []uint64, limit uint64, elapsed, window time.Duration) expectation {
	var e expectation
	switch {
	case s == slidingLog && elapsed < window:
		e.Kind = "exact"
		for _, a := range attempts {
			e.Value += min(a, limit)
		}
	case s == slidingBound && elapsed < window:
		e.Kind = "at most"
		for _, a := range attempts {
			e.Value += min(a, limit)
		}
	case s == slidingLog || s == slidingBound:
		// Longer than a window: units came back during the cell. Units
		// taken at t return at t + window, so a key can take its limit at
		// 0, window, 2*window, ... within the cell: limit*(elapsed/window + 1).
		// With leases, every leased unit is such a unit.
		e.Kind = "at most"
		windows := uint64(elapsed/window) + 1
		for _, a := range attempts {
			e.Value += min(a, limit*windows)
		}
	default:
		e.Kind = "at most"
		per := limit + uint64(float64(limit)*elapsed.Seconds()/window.Seconds())
		for _, a := range attempts {
			e.Value += min(a, per)
			if a > per {
				e.Slack++
			}
		}
	}
	return e
}

// check compares an admitted count with its expectation: "exact", "ok"
// (within a bound), "OVER" (admitted too many: wrong, not fast) or "UNDER"
// (an exact expectation not reached).
func (e expectation) check(admitted uint64) string {
	switch {
	case e.Kind == "exact" && admitted == e.Value:
		return "exact"
	case e.Kind == "exact" && admitted < e.Value:
		return "UNDER"
	case admitted > e.Value+e.Slack:
		return "OVER"
	}
	return "ok"
}
