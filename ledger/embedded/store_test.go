//go:build unix

package embedded_test

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
)

// TestStoreAnswersAsEngineUnderEviction is TestFileAnswersAsEngine with a
// checkpoint every few requests and no cache at all: every transfer,
// expiry and list entry older than the last checkpoint is read back from
// the store when used.
func TestStoreAnswersAsEngineUnderEviction(t *testing.T) {
	ops := 100_000
	if testing.Short() || raceEnabled {
		ops = 10_000
	}
	clock := embedded.NewManualClock(time.Unix(1_700_000_000, 0))
	w := &equivWorkload{
		t:        t,
		rng:      rand.New(rand.NewPCG(3, 5)),
		clock:    clock,
		mem:      embedded.New(embedded.WithClock(clock)),
		path:     filepath.Join(t.TempDir(), "data"),
		statuses: map[tb.CreateTransferStatus]int{},
	}
	t.Cleanup(w.mem.Close)
	var tuned *embedded.File
	tune := func() {
		if w.file != tuned {
			embedded.SetCheckpointBytes(w.file, 4<<10)
			embedded.SetCacheBudget(w.file, 0)
			tuned = w.file
		}
	}
	w.reopen()
	t.Cleanup(func() { w.file.Close() })
	tune()
	w.provision()
	for w.ops < ops {
		w.step()
		tune()
	}
	if w.reopens == 0 || w.statuses[tb.TransferPendingTransferExpired] == 0 {
		t.Fatalf("%d reopens, transfer results %v: the workload does not test what it should", w.reopens, w.statuses)
	}
}
