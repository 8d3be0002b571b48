package ledger_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// remote hides that an engine is in process, so that a Client takes the
// path it takes with a real cluster: a goroutine and a deadline per call,
// no group commit of its own.
type remote struct{ tb.Client }

func TestRemotePath(t *testing.T) {
	for _, opt := range []struct {
		name string
		opts []ledger.Option
	}{
		{"plain", nil},
		{"coalescing", []ledger.Option{ledger.WithCoalescing(0)}},
		{"leases", []ledger.Option{ledger.WithLeases(ledger.Leases{MaxUnits: 5})}},
	} {
		t.Run(opt.name, func(t *testing.T) {
			c := ledger.New(remote{embedded.New()}, opt.opts...)
			r := ledger.Resource{Name: "remote", Ledger: 1, Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 300, Lazy: true}
			if err := c.CreateResource(ctx, r); err != nil {
				t.Fatal(err)
			}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for g := 0; g < 32; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 20; i++ {
						d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1})
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if admitted.Load() != 300 {
				t.Fatalf("admitted %d, want 300", admitted.Load())
			}
			d := acquire(t, c, r, "u", 1)
			if d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("Acquire beyond the limit = %+v", d)
			}
		})
	}
}
