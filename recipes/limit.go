package recipes

import (
	"fmt"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// Limit is a number of units per window: at most N units are admitted in any
// interval of length Window. Build it with PerSecond, PerMinute, PerHour,
// PerDay, Per, or Bytes(n).Per and Amount(n).Per; it is validated when a
// limiter is built from it.
type Limit struct {
	N      uint64
	Window time.Duration

	of measure // what N counts, when the constructor said (Bytes, Amount)
}

// measure is what a Limit's N counts: said by its constructor, or not.
type measure uint8

const (
	unsaid measure = iota
	bytesMeasure
	moneyMeasure
)

// Per returns n units per window.
func Per(n uint64, window time.Duration) Limit { return Limit{N: n, Window: window} }

// PerSecond returns n units per second.
func PerSecond(n uint64) Limit { return Per(n, time.Second) }

// PerMinute returns n units per minute.
func PerMinute(n uint64) Limit { return Per(n, time.Minute) }

// PerHour returns n units per hour.
func PerHour(n uint64) Limit { return Per(n, time.Hour) }

// PerDay returns n units per 24 hours.
func PerDay(n uint64) Limit { return Per(n, 24*time.Hour) }

// Bytes is a number of bytes, for bandwidth limits: Bytes(10<<20).Per(time.Minute).
type Bytes uint64

// Per returns b bytes per window.
func (b Bytes) Per(window time.Duration) Limit {
	return Limit{N: uint64(b), Window: window, of: bytesMeasure}
}

// Amount is an amount of money in the currency's smallest unit (cents):
// Amount(1000_00).Per(24*time.Hour) is 1000.00 a day.
type Amount uint64

// Per returns a per window.
func (a Amount) Per(window time.Duration) Limit {
	return Limit{N: uint64(a), Window: window, of: moneyMeasure}
}

// Validate reports whether l can be kept in TigerBeetle: a window of whole
// seconds from 1 s to 2^32-1 s (never rounded).
func (l Limit) Validate() error {
	if _, err := ledger.WindowSeconds(l.Window); err != nil {
		return fmt.Errorf("recipes: limit %v: %w", l, err)
	}
	return nil
}

// String returns e.g. "10 per 1m0s".
func (l Limit) String() string { return fmt.Sprintf("%d per %s", l.N, l.Window) }
