package testenv

import (
	"sync/atomic"
	"testing"
	"time"
)

// Lateness measures how late this process's timers fire while a test runs:
// how long a goroutine that asked to wake up after a millisecond waited
// beyond it. On a loaded machine (other processes, -race) that is the
// delay any code, a deadline's timer included, may meet before it runs
// again: a call cannot be held to return by its deadline more closely.
type Lateness struct {
	worst atomic.Int64
}

// WatchLateness starts measuring, until t's cleanup.
func WatchLateness(t testing.TB) *Lateness {
	l := &Lateness{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			time.Sleep(time.Millisecond)
			late := int64(time.Since(start) - time.Millisecond)
			for old := l.worst.Load(); late > old && !l.worst.CompareAndSwap(old, late); old = l.worst.Load() {
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return l
}

// Worst is the latest a timer fired so far.
func (l *Lateness) Worst() time.Duration { return time.Duration(l.worst.Load()) }

// Allowance is how long a call may take beyond its deadline before it is
// late: base, or twice the worst lateness seen (a deadline's timer firing
// late, then the caller being scheduled late), whichever is longer.
func (l *Lateness) Allowance(base time.Duration) time.Duration {
	return max(base, 2*l.Worst())
}
