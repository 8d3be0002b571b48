//go:build unix

package testenv

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// interruptSignals are the signals on which Main stops the servers before the test binary
// exits.
var interruptSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// processAlive reports whether a process with this pid exists (true when unsure).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || !errors.Is(err, syscall.ESRCH)
}

// reraise ends the process with sig's default action, so that whoever started the test
// binary sees it die of the signal it sent.
func reraise(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	signal.Reset(s)
	_ = syscall.Kill(os.Getpid(), s)
}
