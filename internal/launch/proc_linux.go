//go:build linux

package launch

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group, so that a terminal's Ctrl-C reaches
// only the launching process (which stops its servers in order), and asks the kernel to
// kill the server when the thread that started it dies: startChild keeps that thread alive
// until the server is reaped, so this fires only when the whole launching process dies (a
// crash, a panic, SIGKILL, a test's -timeout).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
}
