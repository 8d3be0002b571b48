//go:build !unix

package testenv

import (
	"os"
	"os/exec"
)

var interruptSignals = []os.Signal{os.Interrupt}

func setProcAttr(*exec.Cmd) {}

func terminate(p *os.Process) error { return p.Kill() }

func processAlive(int) bool { return true }

func reraise(os.Signal) {}
