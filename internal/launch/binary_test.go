//go:build unix

package launch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeExecutable(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "tigerbeetle")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFindBinaryOrder(t *testing.T) {
	explicit := writeExecutable(t, t.TempDir())
	env := writeExecutable(t, t.TempDir())
	onPath := writeExecutable(t, t.TempDir())
	t.Setenv("PATH", filepath.Dir(onPath))

	steps := []struct {
		explicit, env, want string
	}{
		{explicit, env, explicit},
		{"", env, env},
		{"", "", onPath},
	}
	for _, s := range steps {
		t.Setenv(EnvBinary, s.env)
		got, err := FindBinary(s.explicit)
		if err != nil || got != s.want {
			t.Errorf("FindBinary(%q) with $%s=%q = %q, %v, want %q", s.explicit, EnvBinary, s.env, got, err, s.want)
		}
	}
}

func TestFindBinaryNone(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(EnvBinary, "")
	_, err := FindBinary("")
	if !errors.Is(err, ErrNoBinary) {
		t.Fatalf("FindBinary(\"\") = %v, want ErrNoBinary", err)
	}
	for _, want := range []string{"explicit path", "$TIGERBEETLE_BIN", "PATH", "scripts/install-tigerbeetle.sh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// A path that was given but does not work is an error, not a reason to skip.
func TestFindBinaryBadPathIsNotErrNoBinary(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	for _, bad := range []string{filepath.Join(dir, "missing"), notExec, dir} {
		t.Setenv(EnvBinary, "")
		if _, err := FindBinary(bad); err == nil || errors.Is(err, ErrNoBinary) {
			t.Errorf("FindBinary(%q) = %v, want an error other than ErrNoBinary", bad, err)
		}
		t.Setenv(EnvBinary, bad)
		if _, err := FindBinary(""); err == nil || errors.Is(err, ErrNoBinary) || !strings.Contains(err.Error(), EnvBinary) {
			t.Errorf("FindBinary(\"\") with $%s=%q = %v, want an error naming the variable", EnvBinary, bad, err)
		}
	}
}

func TestFindBinaryRelativeIsMadeAbsolute(t *testing.T) {
	dir := t.TempDir()
	writeExecutable(t, dir)
	t.Chdir(dir)
	got, err := FindBinary("./tigerbeetle")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "tigerbeetle"); got != want {
		t.Errorf("FindBinary(./tigerbeetle) = %q, want %q", got, want)
	}
}
