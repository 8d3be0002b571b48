package recipes_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/recipes"
)

func ExampleRequestRate() {
	ctx := context.Background()
	clock := embedded.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := ledger.New(embedded.New(embedded.WithClock(clock))) // or ledger.Dial for a cluster

	api, err := recipes.NewRequestRate(c, recipes.Config{Name: "api", Ledger: 1, Lazy: true}, recipes.PerMinute(3))
	if err != nil {
		panic(err)
	}
	if err := api.Create(ctx); err != nil { // once; idempotent
		panic(err)
	}
	for i := 1; i <= 4; i++ {
		d, err := api.Allow(ctx, "alice")
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d: allowed=%v remaining=%d retry after %s\n", i, d.Allowed, d.Remaining, d.RetryAfter.Round(time.Second))
	}
	clock.Advance(time.Minute + time.Millisecond)
	d, _ := api.Allow(ctx, "alice")
	fmt.Printf("a minute later: allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	// Output:
	// request 1: allowed=true remaining=2 retry after 0s
	// request 2: allowed=true remaining=1 retry after 0s
	// request 3: allowed=true remaining=0 retry after 0s
	// request 4: allowed=false remaining=0 retry after 1m0s
	// a minute later: allowed=true remaining=2
}

func ExampleBandwidth() {
	ctx := context.Background()
	c := ledger.New(embedded.New())
	up, err := recipes.NewBandwidth(c, recipes.Config{Name: "upload", Ledger: 2, Lazy: true}, recipes.Bytes(10_000_000).Per(time.Minute))
	if err != nil {
		panic(err)
	}
	if err := up.Create(ctx); err != nil {
		panic(err)
	}
	for _, size := range []uint64{6_000_000, 5_000_000, 4_000_000} {
		d, err := up.AllowN(ctx, "bob", size)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d bytes: allowed=%v remaining=%d\n", size, d.Allowed, d.Remaining)
	}
	// Output:
	// 6000000 bytes: allowed=true remaining=4000000
	// 5000000 bytes: allowed=false remaining=4000000
	// 4000000 bytes: allowed=true remaining=0
}

func ExampleMoneyPerWindow() {
	ctx := context.Background()
	c := ledger.New(embedded.New())
	const usd = 840 // the currency's ledger
	daily, err := recipes.NewMoneyPerWindow(c, recipes.Config{Name: "usd-daily", Ledger: 3}, usd, recipes.Amount(1000_00).Per(24*time.Hour))
	if err != nil {
		panic(err)
	}
	if err := daily.Create(ctx); err != nil {
		panic(err)
	}
	for _, user := range []string{"carol", "shop"} {
		if err := daily.AddUser(ctx, user); err != nil { // the limit and a USD account
			panic(err)
		}
	}
	if err := daily.Fund(ctx, "carol", 700_00); err != nil {
		panic(err)
	}
	for _, amount := range []uint64{600_00, 600_00, 200_00} {
		d, err := daily.Pay(ctx, "carol", "shop", amount)
		if err != nil {
			panic(err)
		}
		funds, _ := daily.Funds(ctx, "carol")
		fmt.Printf("pay %d: allowed=%v (%v), carol holds %d, limit left %d\n", amount, d.Allowed, d.Reason, funds, d.Remaining)
	}
	// Output:
	// pay 60000: allowed=true (admitted), carol holds 10000, limit left 40000
	// pay 60000: allowed=false (limit exceeded), carol holds 10000, limit left 40000
	// pay 20000: allowed=false (insufficient funds), carol holds 10000, limit left 40000
}

// A manual clock makes windows pass at once in tests. Each event the
// engine records gets a nanosecond of its own, at or after the clock's
// reading, so a unit taken "at" T returns a few nanoseconds after T plus
// the window: advance a little beyond the window.
func Example_manualClock() {
	clock := embedded.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := ledger.New(embedded.New(embedded.WithClock(clock)))
	api, _ := recipes.NewRequestRate(c, recipes.Config{Name: "api", Ledger: 1, Lazy: true}, recipes.PerMinute(1))
	_ = api.Create(context.Background())
	ctx := context.Background()
	d, _ := api.Allow(ctx, "alice")
	fmt.Println("first:", d.Allowed)
	d, _ = api.Allow(ctx, "alice")
	fmt.Println("second:", d.Allowed, "retry after about", d.RetryAfter.Round(time.Second))
	clock.Advance(time.Minute + time.Millisecond) // one window, and then some
	d, _ = api.Allow(ctx, "alice")
	fmt.Println("a window later:", d.Allowed)
	// Output:
	// first: true
	// second: false retry after about 1m0s
	// a window later: true
}
