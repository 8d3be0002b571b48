//go:build !unix

package testenv

import "os"

var interruptSignals = []os.Signal{os.Interrupt}

func processAlive(int) bool { return true }

func reraise(os.Signal) {}
