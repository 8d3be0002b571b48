//go:build unix && !linux

package testenv

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group, so that a terminal's Ctrl-C reaches
// only the test binary, whose Main stops the server in order. Without Linux's Pdeathsig, a
// server started with port 0 still exits when the test binary dies: it then reads end of
// file on its standard input.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
