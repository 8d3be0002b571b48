package embedded

import (
	"sync"
	"time"
)

// Clock tells the engine the time. The engine turns it into cluster
// timestamps (nanoseconds since the Unix epoch) and never lets those go
// backwards, whatever the clock does.
type Clock interface {
	Now() time.Time
}

// systemClock is the default Clock: the wall-clock time when the engine was
// created plus the monotonic time elapsed since. Reading it costs one
// monotonic clock read instead of time.Now's two, and steps of the wall
// clock do not affect it.
type systemClock struct {
	start     time.Time // carries a monotonic reading
	startNano uint64
}

func newSystemClock() *systemClock {
	now := time.Now()
	return &systemClock{start: now, startNano: unixNanos(now)}
}

func (c *systemClock) Now() time.Time { return c.start.Add(time.Since(c.start)) }

func (c *systemClock) nanos() uint64 { return c.startNano + uint64(time.Since(c.start)) }

// ManualClock is a Clock that moves only when told to, so that tests can let
// pending transfers expire without waiting. The zero value is not usable;
// create one with NewManualClock. It is safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock stopped at start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward if d is negative).
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t, forward or backward.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// maxTime is the latest clock reading that is a cluster timestamp.
var maxTime = time.Unix(0, timestampMax)

// unixNanos converts a clock reading to a cluster time, clamping times
// before 1970 to zero and times after maxTime, where time.UnixNano is
// undefined, to timestampMax.
func unixNanos(t time.Time) uint64 {
	if t.After(maxTime) {
		return timestampMax
	}
	ns := t.UnixNano()
	if ns < 0 {
		return 0
	}
	return uint64(ns)
}
