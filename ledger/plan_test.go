package ledger_test

import (
	"sync"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/testenv"
)

// A request's plan (Request.Limit) provisions a lazy user with it, and a
// changed plan takes effect with the user's next decision.
func TestPlans(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { testenv.Each(t, func(t *testing.T, b *testenv.Backend) { plans(t, b, m.opts) }) })
	}
}

func plans(t *testing.T, b *testenv.Backend, opts []ledger.Option) {
	_, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 3, Lazy: true})
	c := ledger.New(b.Client, opts...)
	take := func(c *ledger.Client, plan uint64) ledger.Decision {
		t.Helper()
		d, err := c.Acquire(ctx, r, ledger.Request{User: "pro", Amount: 1, Limit: plan})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := take(c, 5); !d.Allowed || d.Limit != 5 || d.Remaining != 4 {
		t.Fatalf("first decision on the pro plan = %+v, want 4 of 5 left", d)
	}
	// Another process that knows nothing of the user applies the plan too.
	other := ledger.New(b.Client)
	if d := take(other, 5); !d.Allowed || d.Limit != 5 {
		t.Fatalf("another process's decision on the same plan = %+v", d)
	}
	if d := take(c, 10); !d.Allowed || d.Limit != 10 {
		t.Fatalf("decision after an upgrade to 10 = %+v", d)
	}
	if u := inspect(t, c, r, "pro"); u.Limit != 10 || u.InFlight != 3 {
		t.Fatalf("after the upgrade: %+v, want limit 10, 3 in flight", u)
	}
	// A downgrade below what is in flight: nothing more until units
	// return; the window never holds more than the larger limit.
	if d := take(c, 2); d.Allowed || d.Limit != 2 {
		t.Fatalf("decision after a downgrade to 2 with 3 in flight = %+v, want denied", d)
	}
	if d := take(c, 2); d.Allowed || d.Limit != 2 { // confirmed by the cluster: later denials are local
		t.Fatalf("second decision on the plan of 2 = %+v, want denied", d)
	}
	// A drained user upgraded is admitted: a denial under its old limit
	// does not answer for its new plan.
	if d := take(c, 2); d.Allowed {
		t.Fatalf("third decision on the plan of 2 = %+v, want denied", d)
	}
	if d := take(c, 10); !d.Allowed || d.Limit != 10 {
		t.Fatalf("decision of a drained user upgraded to 10 = %+v, want admitted", d)
	}
	// Many callers see a plan change at once: one SetLimit.
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Acquire(ctx, r, ledger.Request{User: "pro", Amount: 1, Limit: 4}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if u := inspect(t, c, r, "pro"); u.Limit != 4 {
		t.Fatalf("after 16 concurrent calls on a plan of 4: limit %d", u.Limit)
	}
}

// Reset gives a user's units back at once, and the audit trail shows it.
func TestReset(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 3, Lazy: true})
		from := b.Now().Add(-time.Second)
		for range 3 {
			acquire(t, c, r, "u", 1)
		}
		if d := acquire(t, c, r, "u", 1); d.Allowed {
			t.Fatalf("Acquire beyond the limit = %+v", d)
		}
		n, err := c.Reset(ctx, r, "u") // elsewhere, it shows within a second (see recheck)
		if err != nil || n != 3 {
			t.Fatalf("Reset = %d, %v; want 3 holds ended", n, err)
		}
		if d := acquire(t, c, r, "u", 1); !d.Allowed {
			t.Fatalf("Acquire after Reset = %+v, want allowed", d)
		}
		a, err := c.Audit(ctx, r, "u", from, time.Time{})
		if err != nil || a.Ended != 3 || a.Holds != 4 {
			t.Fatalf("Audit after Reset = %+v, %v; want 4 holds, 3 ended", a, err)
		}
	})
}

type events struct {
	mu sync.Mutex
	by map[string]int
}

func (e *events) ObserveDecision(ev ledger.DecisionEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := ev.Resource.Name + "/" + ev.Decision.Reason.String()
	if ev.Err != nil {
		key = ev.Resource.Name + "/error"
	}
	e.by[key]++
}

// An Observer hears of every decision, one event per hold.
func TestObserver(t *testing.T) {
	ev := &events{by: map[string]int{}}
	c := ledger.New(embedded.New(), ledger.WithObserver(ev))
	r := ledger.Resource{Name: "obs", Ledger: 1, Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 1, Lazy: true}
	m := ledger.Resource{Name: "m", Ledger: 2, Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 10, Currency: 3}
	for _, x := range []ledger.Resource{r, m} {
		if err := c.CreateResource(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	acquire(t, c, r, "a", 1)
	acquire(t, c, r, "a", 1) // denied
	if _, err := c.AcquireAll(ctx, []ledger.Part{{Resource: r, Request: ledger.Request{User: "b", Amount: 1}}, {Resource: r, Request: ledger.Request{User: "c", Amount: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pay(ctx, m, ledger.Payment{From: "x", To: "y", Amount: 1}); err == nil {
		t.Fatal("Pay of unknown users succeeded")
	}
	if _, err := c.Reserve(ctx, r, ledger.Request{User: "d", Amount: 1}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"obs/admitted": 4, "obs/limit exceeded": 1, "m/error": 1}
	for k, n := range want {
		if ev.by[k] != n {
			t.Errorf("events %s: %d, want %d (all: %v)", k, ev.by[k], n, ev.by)
		}
	}
}
