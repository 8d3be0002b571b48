package simnet

import (
	"runtime"
	"time"
)

// clock is the time a Client runs on: the system clock, or a fake one in
// tests.
type clock interface {
	Now() time.Time
	// SleepUntil returns at t (as precisely as it can), or earlier when
	// stop is closed.
	SleepUntil(t time.Time, stop <-chan struct{})
	// After is time.After: for holds, where precision does not matter.
	After(d time.Duration) <-chan time.Time
}

// systemClock sleeps precisely. Go's timers wake up to a millisecond late
// when the process is otherwise idle (the poller waits in whole
// milliseconds), which would make every modelled request of a lone caller
// cost a millisecond. We considered spinning to the deadline (a core busy
// per Client) and chose: a timer for all but the last 1.5 ms, a nanosleep
// (about 60–100 µs late, from the kernel's timer slack) for all but the
// last spin, and yielding spins for the rest.
type systemClock struct{}

const (
	timerSlack = 1500 * time.Microsecond // what a Go timer may overshoot
	spinBelow  = 80 * time.Microsecond   // what a nanosleep may overshoot
)

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (systemClock) SleepUntil(t time.Time, stop <-chan struct{}) {
	for {
		d := time.Until(t)
		switch {
		case d <= 0:
			return
		case d > timerSlack+time.Millisecond:
			tm := time.NewTimer(d - timerSlack)
			select {
			case <-tm.C:
			case <-stop:
				tm.Stop()
				return
			}
		case d > spinBelow:
			preciseSleep(d - spinBelow)
		default:
			runtime.Gosched()
		}
	}
}
