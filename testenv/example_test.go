package testenv_test

import (
	"context"
	"fmt"
	"os"
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

// Launch outside of tests, as `tblimit tigerbeetle up` does: a server that keeps its data.
func ExampleLaunch() {
	p, err := testenv.Launch(context.Background(), testenv.Config{
		Dir:         "./data",
		Port:        3000,
		Development: true,
		Stderr:      os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer p.Stop()
	fmt.Println("listening on", p.Addresses[0])
	_ = p.Wait()
}
