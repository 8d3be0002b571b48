package recipes_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/recipes"
)

// BenchmarkAllow measures parallel single-unit decisions through the
// request-rate recipe on the embedded engine: 128 goroutines on a 2-core
// machine (SetParallelism(64)), limits that are never reached, over one hot
// user or 1024 users.
func BenchmarkAllow(b *testing.B) {
	for _, users := range []int{1, 1024} {
		b.Run(fmt.Sprintf("users=%d", users), func(b *testing.B) {
			ctx := context.Background()
			rl, err := recipes.NewRequestRate(ledger.New(embedded.New()), recipes.Config{Name: "bench", Ledger: 1, Lazy: true}, recipes.Per(1<<40, time.Hour))
			if err != nil {
				b.Fatal(err)
			}
			if err := rl.Create(ctx); err != nil {
				b.Fatal(err)
			}
			keys := make([]string, users)
			for i := range keys {
				keys[i] = fmt.Sprintf("user-%d", i)
				if _, err := rl.Allow(ctx, keys[i]); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.SetParallelism(64)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1))
				for pb.Next() {
					d, err := rl.Allow(ctx, keys[i%users])
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
