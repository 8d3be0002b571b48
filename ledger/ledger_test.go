package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var ctx = context.Background()

// setup creates a resource of the given kind on a fresh ledger.
func setup(t *testing.T, b *testenv.Backend, r ledger.Resource) (*ledger.Client, ledger.Resource) {
	t.Helper()
	c := ledger.New(b.Client)
	r.Ledger = b.NewLedger()
	if r.Name == "" {
		r.Name = "test"
	}
	if r.Kind == 0 {
		r.Kind = ledger.KindRequests
	}
	if r.Kind == ledger.KindMoney && r.Currency == 0 {
		r.Currency = b.NewLedger()
	}
	if err := c.CreateResource(ctx, r); err != nil {
		t.Fatalf("CreateResource(%v) = %v", r, err)
	}
	return c, r
}

func acquire(t *testing.T, c *ledger.Client, r ledger.Resource, user string, n uint64) ledger.Decision {
	t.Helper()
	d, err := c.Acquire(ctx, r, ledger.Request{User: user, Amount: n})
	if err != nil {
		t.Fatalf("Acquire(%s, %d) error = %v", user, n, err)
	}
	return d
}

// eachInTime runs body on each backend (testenv.Each) with window w, and
// again with a longer one, up to max, while it says its work outlasted the
// window (see testenv.Backend.InTime).
func eachInTime(t *testing.T, w, max time.Duration, body func(t *testing.T, b *testenv.Backend, w time.Duration) bool) {
	t.Helper()
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		b.InTime(t, w, max, func(w time.Duration) bool { return body(t, b, w) })
	})
}

func inspect(t *testing.T, c *ledger.Client, r ledger.Resource, user string) ledger.Usage {
	t.Helper()
	u, err := c.Inspect(ctx, r, user)
	if err != nil {
		t.Fatalf("Inspect(%s) error = %v", user, err)
	}
	return u
}

// 64 goroutines hammering one user admit exactly the limit in a window.
func TestConcurrentAcquireAdmitsExactlyTheLimit(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 1000, Lazy: true})
		var admitted, denied atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 64; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 40; i++ {
					d, err := c.Acquire(ctx, r, ledger.Request{User: "hot", Amount: 1})
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						admitted.Add(1)
					} else {
						denied.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if admitted.Load() != 1000 || denied.Load() != 64*40-1000 {
			t.Fatalf("admitted %d, denied %d; want 1000, %d", admitted.Load(), denied.Load(), 64*40-1000)
		}
		if u := inspect(t, c, r, "hot"); u.InFlight != 1000 || u.Available != 0 || u.Limit != 1000 {
			t.Fatalf("Inspect = %+v, want 1000 in flight of 1000", u)
		}
	})
}

func TestInspectAndFlights(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		w := 2 * time.Second
		c, r := setup(t, b, ledger.Resource{Kind: ledger.KindBytes, Window: w, DefaultLimit: 100})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 100}); err != nil {
			t.Fatal(err)
		}
		if u := inspect(t, c, r, "u"); u != (ledger.Usage{Limit: 100, Available: 100}) {
			t.Fatalf("Inspect = %+v, want 100 available", u)
		}
		d1 := acquire(t, c, r, "u", 30)
		b.Advance(t, time.Second)
		if _, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 50, Ref: 77}); err != nil {
			t.Fatal(err)
		}
		u := inspect(t, c, r, "u")
		if u.Limit != 100 || u.InFlight != 80 || u.Available != 20 || u.NextReleaseUnits != 30 {
			t.Fatalf("Inspect = %+v, want 80 in flight, 30 next", u)
		}
		// Timestamps are a few nanoseconds apart; a real server's requests take longer.
		slack := time.Millisecond
		if b.Real {
			slack = 300 * time.Millisecond
		}
		if u.NextRelease <= 0 || u.NextRelease > time.Second+slack || u.ResetAfter <= time.Second-slack || u.ResetAfter > w {
			t.Fatalf("Inspect = %+v: NextRelease want in (0, 1s], ResetAfter in (1s, 2s]", u)
		}
		fs, err := c.Flights(ctx, r, "u", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != 2 || fs[0].ID != d1.ID || fs[0].Amount != 30 || fs[1].Amount != 50 || fs[1].Ref != 77 {
			t.Fatalf("Flights = %+v", fs)
		}
		if got := fs[0].Returns.Sub(fs[0].Taken); got != w {
			t.Fatalf("Flights[0] returns %v after it was taken, want %v", got, w)
		}
	})
}

func TestSetLimit(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		w := 2 * time.Second
		c, r := setup(t, b, ledger.Resource{Window: w, DefaultLimit: 10})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 10}); err != nil {
			t.Fatal(err)
		}
		// Raise, while 4 units are in flight.
		acquire(t, c, r, "u", 4)
		if err := c.SetLimit(ctx, r, "u", 15); err != nil {
			t.Fatal(err)
		}
		if u := inspect(t, c, r, "u"); u.Limit != 15 || u.Available != 11 {
			t.Fatalf("after raising to 15: %+v, want 11 of 15 available", u)
		}
		// Idempotent.
		if err := c.SetLimit(ctx, r, "u", 15); err != nil {
			t.Fatal(err)
		}
		// Lower from what is available.
		if err := c.SetLimit(ctx, r, "u", 8); err != nil {
			t.Fatal(err)
		}
		if u := inspect(t, c, r, "u"); u.Limit != 8 || u.Available != 4 || u.InFlight != 4 {
			t.Fatalf("after lowering to 8: %+v, want 4 of 8 available", u)
		}
		// Lower below what is in flight: 4 in flight, new limit 1. The
		// account must not admit anything until the units return, and then
		// only 1 per window.
		if err := c.SetLimit(ctx, r, "u", 1); err != nil {
			t.Fatal(err)
		}
		u := inspect(t, c, r, "u")
		if u.Limit != 1 || u.Available != 0 {
			t.Fatalf("after lowering to 1: %+v, want limit 1, nothing available", u)
		}
		if d := acquire(t, c, r, "u", 1); d.Allowed {
			t.Fatalf("Acquire right after lowering below in-flight = %+v, want denied", d)
		}
		b.Advance(t, w+time.Millisecond) // units return one window after their own timestamp
		if b.Real {
			time.Sleep(1300 * time.Millisecond) // a hold on a remote cluster may last a second longer
		}
		if u := inspect(t, c, r, "u"); u.Limit != 1 || u.Available != 1 {
			t.Fatalf("a window after lowering to 1: %+v, want 1 of 1 available", u)
		}
		if d := acquire(t, c, r, "u", 1); !d.Allowed {
			t.Fatalf("Acquire = %+v, want allowed", d)
		}
		if d := acquire(t, c, r, "u", 1); d.Allowed {
			t.Fatalf("second Acquire = %+v, want denied", d)
		}
		if err := c.SetLimit(ctx, r, "nobody", 5); !errors.Is(err, ledger.ErrUnknownUser) {
			t.Fatalf("SetLimit(nobody) = %v, want ErrUnknownUser", err)
		}
	})
}

// Lowering by less than the unit in flight posts that unit and holds the
// excess until the unit would have returned: nothing returns early.
func TestSetLimitPartialInFlight(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		w := 4 * time.Second
		c, r := setup(t, b, ledger.Resource{Kind: ledger.KindBytes, Window: w, DefaultLimit: 10})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 10}); err != nil {
			t.Fatal(err)
		}
		acquire(t, c, r, "u", 10)
		if err := c.SetLimit(ctx, r, "u", 5); err != nil {
			t.Fatal(err)
		}
		u := inspect(t, c, r, "u")
		if u.Limit != 5 || u.Available != 0 || u.InFlight != 5 {
			t.Fatalf("after lowering 10 in flight to 5: %+v, want 5 held, 0 available", u)
		}
		b.Advance(t, w/2)
		if d := acquire(t, c, r, "u", 1); d.Allowed {
			t.Fatalf("Acquire half a window later = %+v, want denied", d)
		}
		b.Advance(t, w/2+2*time.Second) // the hold may last up to a second longer
		if b.Real {
			time.Sleep(300 * time.Millisecond)
		}
		if u := inspect(t, c, r, "u"); u.Limit != 5 || u.Available != 5 {
			t.Fatalf("after the window: %+v, want 5 of 5", u)
		}
	})
}

// Concurrent SetLimit calls and requests never lose or double a unit.
func TestSetLimitConcurrent(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 100})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 100}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var admitted atomic.Int64
		for g := 0; g < 8; g++ {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					if d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1}); err != nil {
						t.Error(err)
					} else if d.Allowed {
						admitted.Add(1)
					}
				}
			}()
			go func() {
				defer wg.Done()
				if err := c.SetLimit(ctx, r, "u", 60); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		u := inspect(t, c, r, "u")
		if u.Limit != 60 {
			t.Fatalf("limit %d, want 60", u.Limit)
		}
		if u.InFlight > uint64(admitted.Load()) || admitted.Load() > 100 {
			t.Fatalf("%d admitted, %+v", admitted.Load(), u)
		}
	})
}

func TestLazyUsers(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 3, Lazy: true})
		for i := 0; i < 3; i++ {
			if d := acquire(t, c, r, "new", 1); !d.Allowed || d.Limit != 3 || d.Remaining != uint64(2-i) {
				t.Fatalf("Acquire #%d = %+v, want allowed of 3", i+1, d)
			}
		}
		if d := acquire(t, c, r, "new", 1); d.Allowed {
			t.Fatalf("Acquire #4 = %+v, want denied", d)
		}
		// A limit set by an operator stands.
		if err := c.SetLimit(ctx, r, "new", 5); err != nil {
			t.Fatal(err)
		}
		if d := acquire(t, c, r, "new", 1); !d.Allowed || d.Limit != 5 {
			t.Fatalf("Acquire after raise = %+v", d)
		}
		users, err := c.Users(ctx, r)
		if err != nil || len(users) != 1 || users[0].Key != "new" || users[0].Limit != 5 || users[0].InFlight != 4 {
			t.Fatalf("Users = %+v, %v", users, err)
		}
	})
}

// Retrying an attempt with its ID does not count twice.
func TestRetrySameAttempt(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 2})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 2}); err != nil {
			t.Fatal(err)
		}
		id := ledger.NewID()
		for i := 0; i < 3; i++ {
			d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1, ID: id})
			if err != nil || !d.Allowed || d.ID != id {
				t.Fatalf("Acquire with the same ID #%d = %+v, %v, want allowed", i+1, d, err)
			}
		}
		if u := inspect(t, c, r, "u"); u.InFlight != 1 {
			t.Fatalf("InFlight = %d after 3 tries of one attempt, want 1", u.InFlight)
		}
		// A denied attempt stays denied when retried.
		acquire(t, c, r, "u", 1)
		denied := acquire(t, c, r, "u", 1)
		if denied.Allowed {
			t.Fatal("third unit admitted")
		}
		d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1, ID: denied.ID})
		if err != nil || d.Allowed {
			t.Fatalf("retry of a denied attempt = %+v, %v; want denied", d, err)
		}
		// The same ID for a different request is an error.
		if _, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 2, ID: id}); !errors.Is(err, ledger.ErrInvalidID) {
			t.Fatalf("reused ID error = %v, want ErrInvalidID", err)
		}
	})
}

// AcquireAll applies several limits to one request, all or nothing. The
// per-second counts hold while the first units are held: the cluster's
// timestamps say when the work outlasted the window, and InTime then runs it
// again with a longer one.
func TestAcquireAllOrNothing(t *testing.T) {
	eachInTime(t, time.Second, 16*time.Second, acquireAllOrNothing)
}

// acquireAllOrNothing runs the scenario with a short window w; false: the
// work outlasted it.
func acquireAllOrNothing(t *testing.T, b *testenv.Backend, w time.Duration) bool {
	t.Helper()
	c, perSec := setup(t, b, ledger.Resource{Name: "sec", Window: w, DefaultLimit: 3, Lazy: true})
	perHour := ledger.Resource{Name: "hour", Ledger: b.NewLedger(), Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 5, Lazy: true}
	if err := c.CreateResource(ctx, perHour); err != nil {
		t.Fatal(err)
	}
	holds := func() []ledger.Part {
		return []ledger.Part{{Resource: perSec, Request: ledger.Request{User: "u", Amount: 1}}, {Resource: perHour, Request: ledger.Request{User: "u", Amount: 1}}}
	}
	var first uint64
	for i := 0; i < 3; i++ {
		ds, err := c.AcquireAll(ctx, holds())
		if err != nil || !ds[0].Allowed || !ds[1].Allowed {
			t.Fatalf("AcquireAll #%d = %+v, %v", i+1, ds, err)
		}
		if i == 0 {
			first = ds[0].Timestamp
		}
	}
	ds, err := c.AcquireAll(ctx, holds())
	if err == nil && !testenv.Within(first, ds[0].Timestamp, w) {
		return false
	}
	if err != nil || ds[0].Allowed || ds[1].Allowed || ds[0].Reason != ledger.LimitExceeded || ds[1].Reason != ledger.Admitted {
		t.Fatalf("AcquireAll #4 = %+v, %v; want denied by the per-second limit", ds, err)
	}
	if u := inspect(t, c, perHour, "u"); u.InFlight != 3 {
		t.Fatalf("per hour in flight = %d, want 3: a denied chain must take nothing", u.InFlight)
	}
	b.Advance(t, w+time.Millisecond)
	if b.Real {
		time.Sleep(300 * time.Millisecond)
	}
	var fifth uint64
	for i := 0; i < 2; i++ {
		ds, err := c.AcquireAll(ctx, holds())
		if err != nil || !ds[0].Allowed {
			t.Fatalf("AcquireAll after a window #%d = %+v, %v", i+1, ds, err)
		}
		if i == 0 {
			fifth = ds[0].Timestamp
		}
	}
	ds, err = c.AcquireAll(ctx, holds())
	if err != nil || ds[0].Allowed || ds[1].Reason != ledger.LimitExceeded || ds[1].RetryAfter <= 50*time.Minute {
		t.Fatalf("AcquireAll #6 = %+v, %v; want denied by the per-hour limit", ds, err)
	}
	if !testenv.Within(fifth, ds[1].Timestamp, w) {
		return false // the per-second units may have returned before the inspection
	}
	if u := inspect(t, c, perSec, "u"); u.InFlight != 2 {
		t.Fatalf("per second in flight = %d, want 2", u.InFlight)
	}
	return true
}

// Bad input gets a clear error and writes nothing.
func TestBadInputWritesNothing(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Minute, DefaultLimit: 5})
		money := ledger.Resource{Name: "m", Ledger: b.NewLedger(), Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 100, Currency: b.NewLedger()}
		if err := c.CreateResource(ctx, money); err != nil {
			t.Fatal(err)
		}
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 5}); err != nil {
			t.Fatal(err)
		}
		if err := c.Provision(ctx, money, ledger.UserLimit{Key: "u", Limit: 100}); err != nil {
			t.Fatal(err)
		}
		unknown := r
		unknown.Ledger = b.NewLedger()
		bad := r
		bad.Window = 1500 * time.Millisecond
		for _, tc := range []struct {
			name string
			err  error
			do   func() error
		}{
			{"amount 0", ledger.ErrInvalidAmount, func() error { _, err := c.Acquire(ctx, r, ledger.Request{User: "u"}); return err }},
			{"amount 2^63", ledger.ErrInvalidAmount, func() error {
				_, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1 << 63})
				return err
			}},
			{"empty key", ledger.ErrInvalidKey, func() error { _, err := c.Acquire(ctx, r, ledger.Request{Amount: 1}); return err }},
			{"unknown user", ledger.ErrUnknownUser, func() error { _, err := c.Acquire(ctx, r, ledger.Request{User: "x", Amount: 1}); return err }},
			{"unknown resource", ledger.ErrUnknownResource, func() error {
				_, err := c.Acquire(ctx, unknown, ledger.Request{User: "u", Amount: 1})
				return err
			}},
			{"fractional window", ledger.ErrInvalidWindow, func() error { _, err := c.Acquire(ctx, bad, ledger.Request{User: "u", Amount: 1}); return err }},
			{"provision on unknown resource", ledger.ErrUnknownResource, func() error {
				return c.Provision(ctx, unknown, ledger.UserLimit{Key: "v", Limit: 1})
			}},
			{"provision with a bad key among good ones", ledger.ErrInvalidKey, func() error {
				return c.Provision(ctx, r, ledger.UserLimit{Key: "v", Limit: 1}, ledger.UserLimit{Key: "", Limit: 1})
			}},
			{"provision twice the same key", ledger.ErrInvalidKey, func() error {
				return c.Provision(ctx, r, ledger.UserLimit{Key: "v", Limit: 1}, ledger.UserLimit{Key: "v", Limit: 2})
			}},
			{"resource redefined", ledger.ErrResourceMismatch, func() error {
				changed := r
				changed.DefaultLimit = 6
				return c.CreateResource(ctx, changed)
			}},
			{"pay to an unknown user", ledger.ErrUnknownUser, func() error {
				_, err := c.Pay(ctx, money, ledger.Payment{From: "u", To: "nobody", Amount: 1})
				return err
			}},
			{"pay oneself", ledger.ErrInvalidKey, func() error {
				_, err := c.Pay(ctx, money, ledger.Payment{From: "u", To: "u", Amount: 1})
				return err
			}},
			{"pay on a request resource", ledger.ErrInvalidResource, func() error {
				_, err := c.Pay(ctx, r, ledger.Payment{From: "u", To: "v", Amount: 1})
				return err
			}},
			{"fund 0", ledger.ErrInvalidAmount, func() error { return c.Fund(ctx, money.Currency, ledger.Request{User: "u"}) }},
		} {
			if err := tc.do(); !errors.Is(err, tc.err) {
				t.Errorf("%s: error = %v, want %v", tc.name, err, tc.err)
			}
		}
		if u := inspect(t, c, r, "u"); u != (ledger.Usage{Limit: 5, Available: 5}) {
			t.Fatalf("after bad input: %+v, want untouched", u)
		}
		if _, err := c.Inspect(ctx, r, "v"); !errors.Is(err, ledger.ErrUnknownUser) {
			t.Fatalf("user v exists after failed provisioning: %v", err)
		}
		if f, err := c.Funds(ctx, money.Currency, "u"); err != nil || f != 0 {
			t.Fatalf("Funds = %d, %v, want 0", f, err)
		}
	})
}

func TestResources(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Minute, DefaultLimit: 5, Lazy: true})
		if err := c.CreateResource(ctx, r); err != nil {
			t.Fatalf("CreateResource again = %v, want nil (idempotent)", err)
		}
		got, err := c.Resource(ctx, r.Ledger)
		if err != nil || got != r {
			t.Fatalf("Resource(%d) = %v, %v; want %v", r.Ledger, got, err, r)
		}
		all, err := c.Resources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, x := range all {
			found = found || x == r
		}
		if !found {
			t.Fatalf("Resources() = %v, missing %v", all, r)
		}
		if _, err := c.Resource(ctx, b.NewLedger()); !errors.Is(err, ledger.ErrUnknownResource) {
			t.Fatalf("Resource(unused ledger) error = %v", err)
		}
	})
}

// Provision is exactly-once however often it runs, in batches larger than one request.
func TestProvisionIdempotentInBatches(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		if b.Real {
			t.Skip("20,000 users take long on a --development server")
		}
		c, r := setup(t, b, ledger.Resource{Window: time.Minute, DefaultLimit: 5})
		users := make([]ledger.UserLimit, 20000)
		for i := range users {
			users[i] = ledger.UserLimit{Key: fmt.Sprintf("user-%d", i), Limit: uint64(i%7 + 1)}
		}
		for run := 0; run < 2; run++ {
			if err := c.Provision(ctx, r, users...); err != nil {
				t.Fatal(err)
			}
		}
		users[123].Limit = 42
		if err := c.Provision(ctx, r, users...); err != nil {
			t.Fatal(err)
		}
		all, err := c.Users(ctx, r)
		if err != nil || len(all) != len(users) {
			t.Fatalf("Users = %d, %v; want %d", len(all), err, len(users))
		}
		for _, u := range []int{0, 123, 19999} {
			if got := inspect(t, c, r, users[u].Key); got.Limit != users[u].Limit {
				t.Fatalf("%s: limit %d, want %d", users[u].Key, got.Limit, users[u].Limit)
			}
		}
	})
}

// Holds ended (cancelled or committed) long after they were taken are not
// counted as in flight, however many transfers lie between a hold and its
// end: not by Inspect, not by SetLimit when it lowers a limit, and not when
// the newest transfers of a user are all cancellations.
func TestEndedHoldsAreNotInFlight(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c := ledger.New(b.Client)
		r := ledger.Resource{Name: "ended", Ledger: b.NewLedger(), Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 100}
		if err := c.CreateResource(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 100}); err != nil {
			t.Fatal(err)
		}
		reserve := func(n int) []*ledger.Reservation {
			var rs []*ledger.Reservation
			for range n {
				rv, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 1})
				if err != nil || !rv.OK() {
					t.Fatalf("Reserve = %+v, %v", rv, err)
				}
				rs = append(rs, rv)
			}
			return rs
		}
		early := reserve(1) // the oldest hold, ended last
		b.Advance(t, 2*time.Second)
		kept := reserve(40)
		firstKept := kept[0].Decision().Timestamp
		b.Advance(t, 2*time.Second)
		cancelled := append(reserve(20), early...)
		for _, rv := range cancelled {
			if err := rv.Cancel(ctx); err != nil {
				t.Fatal(err)
			}
		}
		u := inspect(t, c, r, "u")
		if u.InFlight != 40 {
			t.Fatalf("Inspect = %+v, want 40 in flight", u)
		}
		now := uint64(b.Now().UnixNano())
		wantNext := time.Duration(firstKept + uint64(time.Hour) - now)
		if d := u.NextRelease - wantNext; d < -500*time.Millisecond || d > 500*time.Millisecond {
			t.Errorf("NextRelease = %v, want %v (the first kept hold's, not the cancelled one's)", u.NextRelease, wantNext)
		}
		lastKept := kept[len(kept)-1].Decision().Timestamp
		wantReset := time.Duration(lastKept + uint64(time.Hour) - now)
		if d := u.ResetAfter - wantReset; d < -500*time.Millisecond || d > 500*time.Millisecond {
			t.Errorf("ResetAfter = %v, want %v (the last kept hold's)", u.ResetAfter, wantReset)
		}
		// Lowering the limit below what is in flight posts kept holds, never
		// the cancelled ones.
		if err := c.SetLimit(ctx, r, "u", 10); err != nil {
			t.Fatalf("SetLimit(10) with 40 in flight: %v", err)
		}
		if u := inspect(t, c, r, "u"); u.Limit != 10 || u.Available != 0 {
			t.Fatalf("after SetLimit(10): %+v, want limit 10, nothing available", u)
		}
	})
}

// Lowering a limit far below what is in flight takes a few steps, not one
// per hold: the requests it sends do not grow with the square of the holds.
func TestSetLimitLowersManyHoldsInFewRequests(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		const n = 300
		c := ledger.New(b.Client)
		r := ledger.Resource{Name: "many", Ledger: b.NewLedger(), Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: n}
		if err := c.CreateResource(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: n}); err != nil {
			t.Fatal(err)
		}
		for range n {
			if d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1}); err != nil || !d.Allowed {
				t.Fatalf("Acquire = %+v, %v", d, err)
			}
		}
		before := c.Stats()
		if err := c.SetLimit(ctx, r, "u", 1); err != nil {
			t.Fatal(err)
		}
		after := c.Stats()
		sent := after.LookupTransfers.Requests - before.LookupTransfers.Requests +
			after.GetAccountTransfers.Requests - before.GetAccountTransfers.Requests +
			after.CreateTransfers.Requests - before.CreateTransfers.Requests +
			after.LookupAccounts.Requests - before.LookupAccounts.Requests
		t.Logf("SetLimit(1) with %d holds in flight: %d requests", n, sent)
		if sent > 60 {
			t.Errorf("SetLimit(1) with %d holds in flight sent %d requests", n, sent)
		}
		if u := inspect(t, c, r, "u"); u.Limit != 1 || u.InFlight != 1 || u.Available != 0 {
			t.Fatalf("after SetLimit(1): %+v, want limit 1, 1 in flight", u)
		}
	})
}
