package main

import (
	"cmp"
	"slices"
	"time"
)

// windowBound is a limiter's promise for one key: at most Bound admissions
// in any interval of Length.
type windowBound struct {
	Length time.Duration
	Bound  uint64
}

// windowResult is a windowBound checked on the admissions of a cell.
type windowResult struct {
	LengthSec float64 `json:"length_s"`
	Bound     uint64  `json:"bound"`
	// MaxSeen is the most admissions of one key whose calls all began and
	// returned within one interval of Length: a lower bound of the true
	// maximum (the instant a limiter admits is only known to lie within
	// its call), so a correct limiter never shows more than Bound.
	MaxSeen uint64 `json:"max_seen"`
	Key     int    `json:"key"` // the key where MaxSeen was seen
	Check   string `json:"check"`
}

// checkWindows checks bounds on the admissions the workers recorded: for
// each bound and each key, the most admissions that certainly fell within
// one interval of the bound's length.
func checkWindows(ws []*worker, bounds []windowBound) []windowResult {
	var all []admission
	for _, w := range ws {
		all = append(all, w.adms...)
	}
	slices.SortFunc(all, func(a, b admission) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.start, b.start)
	})
	out := make([]windowResult, len(bounds))
	for bi, b := range bounds {
		r := windowResult{LengthSec: b.Length.Seconds(), Bound: b.Bound, Key: -1, Check: "ok"}
		for i := 0; i < len(all); {
			j := i
			for j < len(all) && all[j].key == all[i].key {
				j++
			}
			if n := maxInWindow(all[i:j], int64(b.Length), b.Bound); n > r.MaxSeen || r.Key < 0 {
				r.MaxSeen, r.Key = n, int(all[i].key)
			}
			i = j
		}
		if r.MaxSeen > b.Bound {
			r.Check = "OVER"
		}
		out[bi] = r
	}
	return out
}

// maxInWindow returns the most admissions of g (one key, sorted by start)
// whose calls lie within one half-open interval of length l, or a number
// above stop as soon as one is found. The maximum is reached by an
// interval that begins at some call's start.
func maxInWindow(g []admission, l int64, stop uint64) uint64 {
	var best uint64
	k := 0
	for i := range g {
		end := g[i].start + l
		k = max(k, i)
		for k < len(g) && g[k].start < end {
			k++
		}
		if uint64(k-i) <= best {
			continue // cannot beat best
		}
		var n uint64
		for _, a := range g[i:k] {
			if a.end < end {
				n++
			}
		}
		best = max(best, n)
		if best > stop {
			return best
		}
	}
	return best
}
