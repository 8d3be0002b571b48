package ledger_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// Several windows for one request, applied all-or-nothing.
func ExampleClient_AcquireAll() {
	ctx := context.Background()
	c := ledger.New(embedded.New())
	perSecond := ledger.Resource{Name: "api-1s", Ledger: 1, Kind: ledger.KindRequests, Window: time.Second, DefaultLimit: 2, Lazy: true}
	perHour := ledger.Resource{Name: "api-1h", Ledger: 2, Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 100, Lazy: true}
	for _, r := range []ledger.Resource{perSecond, perHour} {
		if err := c.CreateResource(ctx, r); err != nil {
			panic(err)
		}
	}
	for i := 1; i <= 3; i++ {
		ds, err := c.AcquireAll(ctx, []ledger.Part{
			{Resource: perSecond, Request: ledger.Request{User: "alice", Amount: 1}},
			{Resource: perHour, Request: ledger.Request{User: "alice", Amount: 1}},
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d: allowed=%v; per second: %v, %d left; per hour: %d left\n",
			i, ds[0].Allowed, ds[0].Reason, ds[0].Remaining, ds[1].Remaining)
	}
	// Output:
	// request 1: allowed=true; per second: admitted, 1 left; per hour: 99 left
	// request 2: allowed=true; per second: admitted, 0 left; per hour: 98 left
	// request 3: allowed=false; per second: limit exceeded, 0 left; per hour: 98 left
}

func ExampleClient_SetLimit() {
	ctx := context.Background()
	c := ledger.New(embedded.New())
	r := ledger.Resource{Name: "api", Ledger: 1, Kind: ledger.KindRequests, Window: time.Minute, DefaultLimit: 10}
	if err := c.CreateResource(ctx, r); err != nil {
		panic(err)
	}
	if err := c.Provision(ctx, r, ledger.UserLimit{Key: "alice", Limit: 10}); err != nil {
		panic(err)
	}
	if _, err := c.Acquire(ctx, r, ledger.Request{User: "alice", Amount: 6}); err != nil {
		panic(err)
	}
	// Lower the limit below what is in flight: nothing more is admitted
	// until the six units return, then 4 per minute.
	if err := c.SetLimit(ctx, r, "alice", 4); err != nil {
		panic(err)
	}
	u, err := c.Inspect(ctx, r, "alice")
	if err != nil {
		panic(err)
	}
	fmt.Printf("limit %d, in flight %d, available %d\n", u.Limit, u.InFlight, u.Available)
	// Output:
	// limit 4, in flight 4, available 0
}
