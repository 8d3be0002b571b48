package testenv_test

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/testenv"
)

// A test that needs a server of its own. Most tests share one: see Shared and Each.
func ExampleStart() {
	_ = func(t *testing.T) {
		srv := testenv.Start(t) // skips when there is no tigerbeetle binary
		client := srv.Client(t)
		if err := client.Nop(); err != nil {
			t.Fatal(err)
		}
	}
}

// One test body, run on the embedded engine and on a real server.
func ExampleEach() {
	_ = func(t *testing.T) {
		testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
			ledger := b.NewLedger() // not seen by other tests on the shared server
			_ = ledger
			b.Advance(t, time.Minute) // instant on the embedded engine, a real wait otherwise
		})
	}
}

// A test that stops, kills and restarts replicas of a cluster of its own.
func ExampleStartCluster() {
	_ = func(t *testing.T) {
		c := testenv.StartCluster(t, 3) // skips when there is no tigerbeetle binary
		client := c.Client(t)           // given every replica's address
		if err := c.KillReplica(0); err != nil {
			t.Fatal(err)
		}
		if err := client.Nop(); err != nil { // two of three replicas still answer
			t.Fatal(err)
		}
		if err := c.RestartReplica(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
	}
}
