package main

import "time"

// floor is the fewest transfers per admitted decision that a kind of
// limiter could send on a cell: its key sequence, number of callers, rate
// and window, knowing the whole future. It tells whether a threshold on
// transfers per admitted decision can be met at all on that cell, whatever
// the implementation.
//
// The model: the cell's decisions in sequence order, decision i at instant
// i × elapsed / decisions, every key limited to limit units per window by a
// sliding window log (the decisions admitted are those the log admits), one
// unit per decision. A denial costs nothing (as if every denied key were
// known to be drained). Then:
//   - Raw: one transfer per decision, the recipe as DESIGN.md states it.
//   - Exact: a transfer may serve several decisions of one key only if
//     they can be in flight together. Each caller claims chunk decisions
//     at a time and makes them one after the other, so any two decisions
//     less than chunk × callers apart in the sequence are counted as
//     mergeable: more than the callers usually have in flight together,
//     though a caller stalled far behind the others could hold a decision
//     longer. It is a model of the closed loop, not a proof.
//   - Lease: a lease serves at most K units of one key, all admitted within
//     τ of its first one.
//   - WindowLease: the same with τ = the window and K = the limit: the
//     most any lease taken as one transfer can cover.
//
// Each count is the minimum for its rule (a greedy cover of every key's
// admitted decisions, which is optimal on a line).
type floor struct {
	Decisions   int64   `json:"decisions"`
	Admitted    int64   `json:"admitted"`
	Raw         float64 `json:"raw"`
	Exact       float64 `json:"exact"`
	Lease       float64 `json:"lease"`
	WindowLease float64 `json:"window_lease"`
	// SingleShare is the share of admitted decisions with no other
	// admitted decision of their key within τ before or after: each costs
	// a transfer in any scheme that does not take units for a key before
	// it is asked.
	SingleShare float64 `json:"single_share"`
	LeaseTau    string  `json:"lease_tau"`
	LeaseK      uint64  `json:"lease_k"`
}

// floors computes the floor of a cell of n decisions over elapsed, with
// leases of lifetime tau and at most k units.
func floors(w *workload, n int64, callers int, elapsed, window, tau time.Duration, k uint64) *floor {
	if n <= 0 || elapsed <= 0 || w.limit == 0 {
		return nil
	}
	type cover struct {
		start int64 // index or instant of the open transfer's first decision
		used  uint64
		open  bool
	}
	type keyState struct {
		log                []int64 // instants of the admitted units in the window (a ring, grown up to limit)
		head, size         int
		exact, lease, wide cover
		last               int64 // instant of the last admitted decision
		lastAlone          bool  // it had none within τ before it
		seen               bool
	}
	keys := make([]keyState, w.users)
	span := int64(chunk * callers)
	var exact, lease, wide, admitted, alone int64
	step := float64(elapsed) / float64(n)
	take := func(c *cover, at int64, length int64, capacity uint64) bool {
		if c.open && at-c.start < length && c.used < capacity {
			c.used++
			return false
		}
		*c = cover{start: at, used: 1, open: true}
		return true
	}
	for i := int64(0); i < n; i++ {
		ks := &keys[w.key(i)]
		t := int64(float64(i) * step)
		for ks.size > 0 && ks.log[ks.head] <= t-int64(window) {
			ks.head = (ks.head + 1) % len(ks.log)
			ks.size--
		}
		if uint64(ks.size) == w.limit {
			continue // denied
		}
		if ks.size == len(ks.log) { // full below the limit: grow, oldest first
			grown := make([]int64, ks.size, min(max(2*ks.size, 4), int(min(w.limit, 1<<30))))
			for j := range ks.size {
				grown[j] = ks.log[(ks.head+j)%len(ks.log)]
			}
			ks.log, ks.head = grown[:cap(grown)], 0
		}
		ks.log[(ks.head+ks.size)%len(ks.log)] = t
		ks.size++
		admitted++
		if take(&ks.exact, i, span, ^uint64(0)) {
			exact++
		}
		if take(&ks.lease, t, int64(tau), k) {
			lease++
		}
		if take(&ks.wide, t, int64(window), w.limit) {
			wide++
		}
		near := ks.seen && t-ks.last < int64(tau)
		if ks.seen && ks.lastAlone && !near {
			alone++ // the previous one: nothing within τ on either side
		}
		ks.last, ks.lastAlone, ks.seen = t, !near, true
	}
	for _, ks := range keys {
		if ks.seen && ks.lastAlone {
			alone++
		}
	}
	if admitted == 0 {
		return nil
	}
	a := float64(admitted)
	return &floor{
		Decisions:   n,
		Admitted:    admitted,
		Raw:         float64(n) / a,
		Exact:       float64(exact) / a,
		Lease:       float64(lease) / a,
		WindowLease: float64(wide) / a,
		SingleShare: float64(alone) / a,
		LeaseTau:    tau.String(),
		LeaseK:      k,
	}
}
