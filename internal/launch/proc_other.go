//go:build !unix

package launch

import (
	"os"
	"os/exec"
)

func setProcAttr(*exec.Cmd) {}

func terminate(p *os.Process) error { return p.Kill() }
