package recipes_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/recipes"
)

// Three limits on every key: 2 requests a second, 5 a minute and 1000
// bytes a minute, decided as one chain.
func ExampleLimiter() {
	ctx := context.Background()
	c := ledger.New(embedded.New()) // or ledger.Dial for a cluster
	api, err := recipes.NewLimiter(c, "api", []recipes.Policy{
		{Name: "api-1s", Ledger: 1, Limit: recipes.PerSecond(2), Lazy: true},
		{Name: "api-1m", Ledger: 2, Limit: recipes.PerMinute(5), Lazy: true},
		{Name: "upload-1m", Ledger: 3, Limit: recipes.Bytes(1000).Per(time.Minute), Unit: recipes.ContentBytes, Lazy: true},
	})
	if err != nil {
		panic(err)
	}
	if err := api.Create(ctx); err != nil { // once; idempotent
		panic(err)
	}
	for _, size := range []uint64{600, 300, 300, 100} {
		r, err := api.AllowCost(ctx, "alice", recipes.Cost{Requests: 1, Bytes: size})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d bytes: allowed=%v denied by %q;", size, r.Allowed, r.DeniedBy)
		for _, p := range r.Policies() {
			fmt.Printf(" %s %d left", p.Policy, p.Decision.Remaining)
		}
		fmt.Println()
	}
	// Output:
	// 600 bytes: allowed=true denied by ""; api-1s 1 left api-1m 4 left upload-1m 400 left
	// 300 bytes: allowed=true denied by ""; api-1s 0 left api-1m 3 left upload-1m 100 left
	// 300 bytes: allowed=false denied by "api-1s"; api-1s 0 left api-1m 3 left upload-1m 100 left
	// 100 bytes: allowed=false denied by "api-1s"; api-1s 0 left api-1m 3 left upload-1m 100 left
}

// Payment is what a payment service limits.
type Payment struct {
	Customer, Merchant string
	Cents              uint64
}

// A payment service's stack: a global rate, a rate per customer, and a
// rate per customer and merchant, all-or-nothing.
func ExampleStack() {
	ctx := context.Background()
	c := ledger.New(embedded.New())
	limiter := func(name string, ledgerNo uint32, l recipes.Limit) *recipes.Limiter {
		lim, err := recipes.NewLimiter(c, name, []recipes.Policy{{Name: name, Ledger: ledgerNo, Limit: l, Lazy: true}})
		if err != nil {
			panic(err)
		}
		if err := lim.Create(ctx); err != nil {
			panic(err)
		}
		return lim
	}
	payments, err := recipes.NewStack("payments", []recipes.Layer[Payment]{
		{Limiter: limiter("global", 10, recipes.PerSecond(1000)), Key: func(Payment) string { return "all" }},
		{Limiter: limiter("customer", 11, recipes.PerMinute(3)), Key: func(p Payment) string { return p.Customer }},
		{Limiter: limiter("merchant", 12, recipes.PerMinute(2)), Key: func(p Payment) string { return p.Customer + "|" + p.Merchant }},
	})
	if err != nil {
		panic(err)
	}
	for _, p := range []Payment{{"carol", "shop", 500}, {"carol", "shop", 700}, {"carol", "shop", 100}, {"carol", "cafe", 300}, {"carol", "cafe", 200}} {
		r, err := payments.Allow(ctx, p)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s at %s: allowed=%v denied by %q\n", p.Customer, p.Merchant, r.Allowed, r.DeniedBy)
	}
	// Output:
	// carol at shop: allowed=true denied by ""
	// carol at shop: allowed=true denied by ""
	// carol at shop: allowed=false denied by "merchant"
	// carol at cafe: allowed=true denied by ""
	// carol at cafe: allowed=false denied by "customer"
}

// Limits chosen per key at decision time: free and pro plans, and a key
// with an override.
func ExamplePlans() {
	ctx := context.Background()
	c := ledger.New(embedded.New())
	tier := map[string]string{"fred": "free", "pat": "pro"} // e.g. from the customer database
	plans := recipes.NewPlans(func(_ context.Context, key string) string { return tier[key] },
		map[string]recipes.Plan{"free": {"calls": 10}, "pro": {"calls": 1000}})
	if err := plans.Override("vip", recipes.Plan{"calls": 5000}); err != nil {
		panic(err)
	}
	api, err := recipes.NewLimiter(c, "api", []recipes.Policy{
		{Name: "calls", Ledger: 1, Limit: recipes.PerMinute(1), Lazy: true}, // keys without a plan
	}, recipes.WithPlans(plans))
	if err != nil {
		panic(err)
	}
	if err := api.Create(ctx); err != nil {
		panic(err)
	}
	for _, key := range []string{"fred", "pat", "vip", "anon"} {
		r, err := api.Allow(ctx, key)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: limit %d, %d left\n", key, r.Policies()[0].Decision.Limit, r.Policies()[0].Decision.Remaining)
	}
	// Output:
	// fred: limit 10, 9 left
	// pat: limit 1000, 999 left
	// vip: limit 5000, 4999 left
	// anon: limit 1, 0 left
}

// Wait blocks until the key is admitted, like x/time/rate's Wait.
func ExampleLimiter_Wait() {
	ctx := context.Background()
	c := ledger.New(embedded.New())
	jobs, err := recipes.NewLimiter(c, "jobs", []recipes.Policy{{Name: "jobs", Ledger: 1, Limit: recipes.PerSecond(1), Lazy: true}})
	if err != nil {
		panic(err)
	}
	if err := jobs.Create(ctx); err != nil {
		panic(err)
	}
	start := time.Now()
	for i := 1; i <= 2; i++ {
		if _, err := jobs.Wait(ctx, "crawler"); err != nil {
			panic(err)
		}
		fmt.Printf("job %d after %s\n", i, time.Since(start).Round(time.Second))
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = jobs.Wait(short, "crawler")
	fmt.Println(errors.Is(err, recipes.ErrWouldExceedDeadline))
	// Output:
	// job 1 after 0s
	// job 2 after 1s
	// true
}

// Peek reads what is left; Reset gives a key's units back.
func ExampleLimiter_Peek() {
	ctx := context.Background()
	c := ledger.New(embedded.New())
	api, err := recipes.NewLimiter(c, "api", []recipes.Policy{{Name: "api-1m", Ledger: 1, Limit: recipes.PerMinute(5), Lazy: true}})
	if err != nil {
		panic(err)
	}
	if err := api.Create(ctx); err != nil {
		panic(err)
	}
	api.AllowN(ctx, "dora", 3)
	us, _ := api.Peek(ctx, "dora")
	fmt.Printf("%s: %d in flight, %d available\n", us[0].Policy, us[0].InFlight, us[0].Available)
	n, _ := api.Reset(ctx, "dora") // an operator's act, in the audit trail
	us, _ = api.Peek(ctx, "dora")
	fmt.Printf("reset %d hold: %d in flight, %d available\n", n, us[0].InFlight, us[0].Available)
	// Output:
	// api-1m: 3 in flight, 2 available
	// reset 1 hold: 0 in flight, 5 available
}

// A new limit tried in shadow mode: it never denies; its would-be denials
// are reported.
func ExampleShadow() {
	ctx := context.Background()
	c := ledger.New(embedded.New())
	strict, err := recipes.NewLimiter(c, "strict", []recipes.Policy{{Name: "strict", Ledger: 1, Limit: recipes.PerMinute(1), Lazy: true}}, recipes.Shadow())
	if err != nil {
		panic(err)
	}
	if err := strict.Create(ctx); err != nil {
		panic(err)
	}
	for range 2 {
		r, _ := strict.Allow(ctx, "eve")
		fmt.Printf("allowed=%v shadow-denied by %v\n", r.Allowed, r.ShadowDenied)
	}
	// Output:
	// allowed=true shadow-denied by []
	// allowed=true shadow-denied by [strict]
}

// The HTTP middleware reports every policy with the current RateLimit
// fields.
func ExampleStackMiddleware() {
	ctx := context.Background()
	c := ledger.New(embedded.New())
	perClient, err := recipes.NewLimiter(c, "client", []recipes.Policy{
		{Name: "client-1s", Ledger: 1, Limit: recipes.PerSecond(1), Lazy: true},
		{Name: "client-1m", Ledger: 2, Limit: recipes.PerMinute(100), Lazy: true},
	})
	if err != nil {
		panic(err)
	}
	trusted, _ := recipes.ParsePrefixes("10.0.0.0/8") // the load balancers
	s, err := recipes.NewStack("api", []recipes.Layer[*http.Request]{
		{Limiter: perClient, Key: recipes.ClientIP(recipes.Proxies{Trusted: trusted})},
	})
	if err != nil {
		panic(err)
	}
	if err := s.Create(ctx); err != nil {
		panic(err)
	}
	h := recipes.StackMiddleware(s, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	for range 2 {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "10.1.1.1:5000"
		req.Header.Set("X-Forwarded-For", "198.51.100.7")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
		fmt.Println("  RateLimit-Policy:", rec.Header().Get("RateLimit-Policy"))
		fmt.Println("  RateLimit:", rec.Header().Get("RateLimit"))
	}
	// Output:
	// 200 hello
	//   RateLimit-Policy: "client-1s";q=1;w=1, "client-1m";q=100;w=60
	//   RateLimit: "client-1s";r=0;t=1, "client-1m";r=99;t=60
	// 429 too many requests
	//   RateLimit-Policy: "client-1s";q=1;w=1, "client-1m";q=100;w=60
	//   RateLimit: "client-1s";r=0;t=1, "client-1m";r=99;t=1
}

// At most 8 requests of each API key in flight; a slot is given back when
// the handler returns, or when its 30 s lease ends if the process dies.
func ExampleConcurrencyMiddleware() {
	ctx := context.Background()
	c := ledger.New(embedded.New())
	inflight, err := recipes.NewConcurrency(c, recipes.Config{Name: "inflight", Ledger: 1, Lazy: true}, 8, 30*time.Second)
	if err != nil {
		panic(err)
	}
	if err := inflight.Create(ctx); err != nil {
		panic(err)
	}
	h := recipes.ConcurrencyMiddleware(inflight, recipes.Header("X-Api-Key"))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest("GET", "/report", nil)
	req.Header.Set("X-Api-Key", "k-123")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	u, _ := inflight.Inspect(ctx, "k-123")
	fmt.Println(rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"))
	fmt.Println("in flight after the handler returned:", u.InFlight)
	// Output:
	// 200 "inflight";q=8;qu="concurrent-requests" "inflight";r=7
	// in flight after the handler returned: 0
}
