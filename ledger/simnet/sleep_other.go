//go:build !linux

package simnet

import "time"

// preciseSleep sleeps for d; elsewhere than on Linux, with a Go timer.
func preciseSleep(d time.Duration) { time.Sleep(d) }
