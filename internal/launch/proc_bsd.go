//go:build unix && !linux

package launch

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group, so that a terminal's Ctrl-C reaches
// only the launching process, which stops its servers in order. Without Linux's Pdeathsig,
// a server started with port 0 still exits when the launching process dies: it then reads
// end of file on its standard input.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
