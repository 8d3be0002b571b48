package cmdtest

import (
	"bytes"
	"os"
	"sync"
	"testing"
)

// WriteFile writes s to path aside and renames it there, as a
// configuration tool would: a reader (a service watching the file) never
// sees half a file.
func WriteFile(t *testing.T, path, s string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// LockedBuffer is a bytes.Buffer safe for a writer and a reader: a
// command's stderr read while it runs.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
