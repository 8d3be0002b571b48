package ledger_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// benchSetup returns a client on a fresh embedded engine with a request
// resource whose users are lazy and whose limit is never reached.
func benchSetup(b *testing.B) (*ledger.Client, ledger.Resource) {
	b.Helper()
	c := ledger.New(embedded.New())
	r := ledger.Resource{Name: "bench", Ledger: 1, Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 1 << 40, Lazy: true}
	if err := c.CreateResource(ctx, r); err != nil {
		b.Fatal(err)
	}
	return c, r
}

// BenchmarkAcquire measures single-unit decisions through ledger on the
// embedded engine, one user per goroutine-local key out of 1024.
func BenchmarkAcquire(b *testing.B) {
	for _, users := range []int{1, 1024} {
		b.Run(fmt.Sprintf("users=%d", users), func(b *testing.B) {
			c, r := benchSetup(b)
			keys := make([]string, users)
			for i := range keys {
				keys[i] = fmt.Sprintf("user-%d", i)
				if _, err := c.Acquire(ctx, r, ledger.Request{User: keys[i], Amount: 1}); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1))
				for pb.Next() {
					d, err := c.Acquire(ctx, r, ledger.Request{User: keys[i%users], Amount: 1})
					if err != nil || !d.Allowed {
						b.Fatal(d, err)
					}
					i++
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
