package ledger_test

import (
	"fmt"
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

// watched is a remote engine whose creates take a while, and which counts
// the reads of accounts sent while a create is in flight.
type watched struct {
	tb.Client
	creates  atomic.Int32
	overlaps atomic.Int32
	lookups  atomic.Int32
}

func (w *watched) CreateTransfers(ts []tb.Transfer) ([]tb.CreateTransferResult, error) {
	w.creates.Add(1)
	defer w.creates.Add(-1)
	time.Sleep(time.Duration(len(ts)%7) * 50 * time.Microsecond)
	return w.Client.CreateTransfers(ts)
}

func (w *watched) LookupAccounts(ids []tb.Uint128) ([]tb.Account, error) {
	w.lookups.Add(1)
	if w.creates.Load() > 0 {
		w.overlaps.Add(1)
	}
	return w.Client.LookupAccounts(ids)
}

// While a batch is in flight the last one is completed, but the reads that
// keep views true wait for quiet: none is sent while a create is in
// flight, whose holds would be in the read before the views learn them;
// and, under a closed loop that always has a batch in flight, they are
// sent all the same.
func TestReadsWaitForQuiet(t *testing.T) {
	for _, opt := range []struct {
		name string
		opts []ledger.Option
	}{
		{"plain", nil},
		{"coalescing", []ledger.Option{ledger.WithCoalescing(0)}},
	} {
		t.Run(opt.name, func(t *testing.T) {
			// Users provisioned by another Client: this one's views of them
			// are due a read of their limits. (A lazy user is provisioned
			// by its caller, whose reads and writes are not the pipeline's.)
			engine := embedded.New()
			t.Cleanup(engine.Close)
			r := ledger.Resource{Name: "quiet", Ledger: 1, Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 1 << 40}
			setup := ledger.New(engine)
			if err := setup.CreateResource(ctx, r); err != nil {
				t.Fatal(err)
			}
			users := make([]ledger.UserLimit, 300)
			for i := range users {
				users[i] = ledger.UserLimit{Key: fmt.Sprintf("u%d", i), Limit: 1 << 40}
			}
			if err := setup.Provision(ctx, r, users...); err != nil {
				t.Fatal(err)
			}
			w := &watched{Client: engine}
			c := ledger.New(w, opt.opts...)
			var wg sync.WaitGroup
			for g := range 24 {
				wg.Go(func() {
					for i := range 200 {
						user := users[(g*200+i)%len(users)].Key
						if _, err := c.Acquire(ctx, r, ledger.Request{User: user, Amount: 1}); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if n := w.overlaps.Load(); n > 0 {
				t.Errorf("%d of %d reads sent while a create was in flight", n, w.lookups.Load())
			}
			if w.lookups.Load() == 0 {
				t.Error("no read sent: the views of 300 new users were never read")
			}
		})
	}
}
