package ledger_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// BenchmarkTransfersPerDecision measures the engine-independent cost of the
// plain recipe, exact coalescing and leases: transfers sent per admitted
// decision, for one hot user and for a Zipf(1.1) mix over 100,000 users
// whose hot users hit their limit (10 per second).
func BenchmarkTransfersPerDecision(b *testing.B) {
	modes := []struct {
		name string
		opt  []ledger.Option
	}{
		{"plain", nil},
		{"exact", []ledger.Option{ledger.WithCoalescing(0)}},
		{"lease", []ledger.Option{ledger.WithLeases(ledger.Leases{Lifetime: 100 * time.Millisecond})}},
	}
	for _, mix := range []string{"hot", "zipf"} {
		for _, callers := range []int{1, 16, 256} {
			for _, m := range modes {
				b.Run(fmt.Sprintf("%s/callers=%d/%s", mix, callers, m.name), func(b *testing.B) {
					c := ledger.New(embedded.New(), m.opt...)
					r := ledger.Resource{Name: "tpd", Ledger: 1, Kind: ledger.KindRequests, Window: time.Second, DefaultLimit: 10, Lazy: true}
					if mix == "hot" {
						r.DefaultLimit = 1 << 40
					}
					if err := c.CreateResource(ctx, r); err != nil {
						b.Fatal(err)
					}
					keys := []string{"hot"}
					var zipf *rand.Zipf
					if mix == "zipf" {
						keys = make([]string, 100_000)
						for i := range keys {
							keys[i] = fmt.Sprintf("user-%d", i)
						}
						zipf = rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, uint64(len(keys)-1))
					}
					var zmu sync.Mutex
					key := func() string {
						if zipf == nil {
							return keys[0]
						}
						zmu.Lock()
						defer zmu.Unlock()
						return keys[zipf.Uint64()]
					}
					var admitted, next atomic.Int64
					before := c.Stats()
					b.ResetTimer()
					var wg sync.WaitGroup
					for g := 0; g < callers; g++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for next.Add(1) <= int64(b.N) {
								d, err := c.Acquire(ctx, r, ledger.Request{User: key(), Amount: 1})
								if err != nil {
									b.Error(err)
									return
								}
								if d.Allowed {
									admitted.Add(1)
								}
							}
						}()
					}
					wg.Wait()
					b.StopTimer()
					after := c.Stats()
					sent := after.CreateTransfers.Events - before.CreateTransfers.Events
					if a := admitted.Load(); a > 0 {
						b.ReportMetric(float64(sent)/float64(a), "transfers/admitted")
						b.ReportMetric(float64(a)/float64(b.N), "admitted/op")
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
				})
			}
		}
	}
}
