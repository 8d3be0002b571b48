package simnet

import (
	"syscall"
	"time"
)

// preciseSleep sleeps for d in a nanosleep: unlike a Go timer, it wakes
// within the kernel's timer slack (50 µs by default).
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
