package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// EnvBinary names the environment variable that points FindBinary at a tigerbeetle binary.
const EnvBinary = "TIGERBEETLE_BIN"

// binaryName is the name FindBinary looks up on PATH.
const binaryName = "tigerbeetle"

var (
	// ErrNoBinary reports that no tigerbeetle binary was given or found. Tests skip on it;
	// any other error from FindBinary (a path that was given but is unusable) is a failure.
	ErrNoBinary = errors.New("launch: no tigerbeetle binary found (tried the explicit path, " +
		"$" + EnvBinary + " and tigerbeetle on PATH); scripts/install-tigerbeetle.sh installs one")

	// ErrExited reports that a tigerbeetle process exited while Start or StartCluster waited for it.
	ErrExited = errors.New("launch: tigerbeetle exited during start-up")
)

// FindBinary returns the absolute path of the tigerbeetle binary to use: explicit if it is
// not empty, else $TIGERBEETLE_BIN if set, else tigerbeetle on PATH. It returns an error
// wrapping ErrNoBinary only when none of the three is given or found; an explicit path or
// $TIGERBEETLE_BIN that names no executable file is a different error, so that a typo fails
// loudly instead of silently skipping the tests that need a server.
func FindBinary(explicit string) (string, error) {
	if explicit != "" {
		return lookBinary(explicit, "explicit path")
	}
	if env := os.Getenv(EnvBinary); env != "" {
		return lookBinary(env, "$"+EnvBinary)
	}
	path, err := exec.LookPath(binaryName)
	if err != nil {
		// exec.ErrDot (found only through a relative PATH entry) counts as not found.
		return "", ErrNoBinary
	}
	return filepath.Abs(path)
}

// lookBinary resolves path like a shell would (PATH lookup for a bare name) and checks that
// it is an executable file.
func lookBinary(path, source string) (string, error) {
	found, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("launch: tigerbeetle binary from %s %q is not usable: %w", source, path, err)
	}
	return filepath.Abs(found)
}
