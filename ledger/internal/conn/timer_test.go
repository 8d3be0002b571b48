package conn

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// A timer that fired unread, once stopped, never ends the wait of the next
// caller to reuse it, whatever timers the program asked for: the test runs
// again with GODEBUG=asynctimerchan=1, the semantics before Go 1.23, in
// which a fired timer's tick stays buffered.
func TestStoppedTimerHasNoStaleTick(t *testing.T) {
	if os.Getenv("CONN_TEST_OLD_TIMERS") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStoppedTimerHasNoStaleTick$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CONN_TEST_OLD_TIMERS=1", "GODEBUG=asynctimerchan=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("with GODEBUG=asynctimerchan=1: %v\n%s", err, out)
		}
	}
	tm := time.NewTimer(time.Millisecond)
	time.Sleep(20 * time.Millisecond) // fired; nobody read it
	stopTimer(tm)
	tm.Reset(time.Hour)
	defer tm.Stop()
	select {
	case <-tm.C:
		t.Fatal("a timer reset to an hour ticked at once")
	case <-time.After(20 * time.Millisecond):
	}
}
