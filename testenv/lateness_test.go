package testenv_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tblimit/tblimit/testenv"
)

// A process whose goroutines all spin makes the watcher's timer late, and
// the allowance grows with it.
func TestLateness(t *testing.T) {
	l := testenv.WatchLateness(t)
	if a := l.Allowance(time.Hour); a != time.Hour {
		t.Fatalf("Allowance(1h) = %v, want 1h at least", a)
	}
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	var wg sync.WaitGroup
	end := time.Now().Add(300 * time.Millisecond)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				// Spin without yielding often: the scheduler preempts
				// every 10 ms or so, so the watcher waits its turn.
			}
		}()
	}
	wg.Wait()
	time.Sleep(5 * time.Millisecond)
	if l.Worst() < 5*time.Millisecond || l.Allowance(time.Millisecond) != 2*l.Worst() {
		t.Fatalf("worst lateness %v, allowance %v: want at least 5ms, and twice it", l.Worst(), l.Allowance(time.Millisecond))
	}
}
