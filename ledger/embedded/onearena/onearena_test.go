//go:build linux && cgo

package onearena

import (
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// However many threads allocate at once, glibc's malloc keeps one arena.
func TestOneArena(t *testing.T) {
	if arenas() < 0 {
		t.Skip("not glibc: its arenas cannot be counted")
	}
	if os.Getenv("MALLOC_ARENA_MAX") != "" || strings.Contains(os.Getenv("GLIBC_TUNABLES"), "glibc.malloc.arena_max") {
		t.Skip("the environment sets glibc's arenas, and rules")
	}
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			runtime.LockOSThread() // a thread each, as many as there are goroutines
			defer runtime.UnlockOSThread()
			churn(200_000)
		})
	}
	wg.Wait()
	if n := arenas(); n != 1 {
		t.Fatalf("glibc's malloc has %d arenas after %d threads allocated at once; want 1", n, 4*runtime.GOMAXPROCS(0))
	}
}
