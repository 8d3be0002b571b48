//go:build unix

package root

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
)

// runMain runs this test binary as tblimit, with the real client linked in,
// and returns its stderr.
func runMain(t *testing.T, args ...string) (string, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), envMain+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	return stderr.String(), err
}

// A command against a dead address prints its own one line, not the
// client's reconnect warnings; --verbose keeps them.
func TestDeadAddressOneLine(t *testing.T) {
	t.Parallel()
	stderr, err := runMain(t, "--addresses", "127.0.0.1:1", "--timeout", "1s", "resources", "list")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != int(cmdutil.ExitError) {
		t.Fatalf("tblimit against a dead address = %v, want exit %d; stderr:\n%s", err, cmdutil.ExitError, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "tblimit: ") || !strings.Contains(lines[0], "127.0.0.1:1") {
		t.Errorf("stderr = %q, want one tblimit: line naming the address", stderr)
	}
	if strings.Contains(stderr, "ledger: ") {
		t.Errorf("stderr = %q, want one prefix, not tblimit: ... ledger: ...", stderr)
	}

	stderr, _ = runMain(t, "--verbose", "--addresses", "127.0.0.1:1", "--timeout", "2s", "resources", "list")
	if !strings.Contains(stderr, "warning(message_bus)") || strings.Count(stderr, "tblimit: ") != 1 {
		t.Errorf("with --verbose, stderr = %q, want the client's warnings and one tblimit: line", stderr)
	}
}
