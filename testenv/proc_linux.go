//go:build linux

package testenv

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group, so that a terminal's Ctrl-C reaches
// only the test binary (whose Main stops the server in order), and asks the kernel to kill
// the server when the thread that started it dies: startChild keeps that thread alive until
// the server is reaped, so this fires only when the whole test binary dies (a crash, a
// panic, SIGKILL, a -timeout).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
}
