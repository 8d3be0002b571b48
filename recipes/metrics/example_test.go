package metrics_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/recipes"
	"github.com/tblimit/tblimit/recipes/metrics"
)

func Example() {
	ctx := context.Background()
	c := ledger.New(embedded.New()) // or ledger.Dial for a cluster
	m := metrics.New(c)
	prometheus.MustRegister(m) // then serve promhttp.Handler() on /metrics

	api, err := recipes.NewLimiter(c, "api", []recipes.Policy{
		{Name: "api-1m", Ledger: 1, Limit: recipes.PerMinute(2), Lazy: true},
	}, recipes.WithObserver(m))
	if err != nil {
		panic(err)
	}
	if err := api.Create(ctx); err != nil {
		panic(err)
	}
	for range 3 {
		api.Allow(ctx, "alice")
	}
	mfs, _ := prometheus.DefaultGatherer.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "tblimit_decisions_total" {
			for _, s := range mf.Metric {
				fmt.Printf("%s %s: %v\n", s.Label[0].GetValue(), s.Label[1].GetValue(), s.GetCounter().GetValue())
			}
		}
	}
	// Output:
	// api admitted: 2
	// api denied: 1
}
