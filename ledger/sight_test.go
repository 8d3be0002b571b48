package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/testenv"
)

// requests is how many requests of each kind a Client sent between two
// Stats.
func requests(before, after ledger.Stats) (accounts, transfers, reads uint64) {
	_, reads = sent(before, after)
	return after.CreateAccounts.Requests - before.CreateAccounts.Requests,
		after.CreateTransfers.Requests - before.CreateTransfers.Requests, reads
}

// A key seen for the first time is decided in two requests, one after
// the other: its accounts, then its credit and hold in one create; a
// known key in one. No hold fails for want of an account, and nothing is
// read, with or without a plan, for short and long keys.
func TestFirstSightCostsOneRequestMore(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		for _, tc := range []struct {
			name   string
			plan   uint64
			prefix string
		}{
			{"default", 0, "k"},
			{"plan", 7, "p"},
			{"long keys", 0, "a-key-longer-than-sixteen-bytes-"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 5, Lazy: true})
				c := ledger.New(b.Client, ledger.WithNow(b.Now))
				limit := max(tc.plan, r.DefaultLimit)
				take := func(key string) ledger.Decision {
					t.Helper()
					d, err := c.Acquire(ctx, r, ledger.Request{User: key, Amount: 1, Limit: tc.plan})
					if err != nil {
						t.Fatalf("Acquire(%s) error = %v", key, err)
					}
					return d
				}
				take(tc.prefix + "warm") // the Client checks the resource once
				const n = 20
				keys := make([]string, n)
				for i := range keys {
					keys[i] = fmt.Sprintf("%s%d", tc.prefix, i)
				}
				before := c.Stats()
				for _, k := range keys {
					if d := take(k); !d.Allowed || d.Limit != limit || d.Remaining != limit-1 {
						t.Fatalf("first Acquire(%s) = %+v, want allowed, %d of %d left", k, d, limit-1, limit)
					}
				}
				after := c.Stats()
				if a, tr, rd := requests(before, after); a != n || tr != n || rd != 0 {
					t.Errorf("%d first sights: %d create_accounts, %d create_transfers and %d reads, want %d, %d and 0", n, a, tr, rd, n, n)
				}
				if ev := after.CreateTransfers.Events - before.CreateTransfers.Events; ev != 2*n {
					t.Errorf("%d first sights: %d transfers, want %d (a credit and a hold each)", n, ev, 2*n)
				}
				before = c.Stats()
				for _, k := range keys {
					if d := take(k); !d.Allowed || d.Remaining != limit-2 {
						t.Fatalf("second Acquire(%s) = %+v, want allowed, %d left", k, d, limit-2)
					}
				}
				if a, tr, rd := requests(before, c.Stats()); a != 0 || tr != n || rd != 0 {
					t.Errorf("%d known keys: %d create_accounts, %d create_transfers and %d reads, want 0, %d and 0", n, a, tr, rd, n)
				}
				// The keys are named in the cluster, long ones included.
				infos, err := c.Users(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				named := map[string]uint64{}
				for _, u := range infos {
					named[u.Key] = u.Limit
				}
				for _, k := range keys {
					if got, ok := named[k]; !ok || got != limit {
						t.Errorf("Users: %q has limit %d (listed: %v), want %d", k, got, ok, limit)
					}
				}
			})
		}
	})
}

// A non-lazy resource still refuses an unknown user, and writes nothing.
func TestFirstSightOfNonLazyResourceWritesNothing(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 5})
		before := c.Stats()
		_, err := c.Acquire(ctx, r, ledger.Request{User: "stranger", Amount: 1})
		if !errors.Is(err, ledger.ErrUnknownUser) {
			t.Fatalf("Acquire of an unknown user on a non-lazy resource = %v, want ErrUnknownUser", err)
		}
		if a := c.Stats().CreateAccounts.Requests - before.CreateAccounts.Requests; a != 0 {
			t.Errorf("%d create_accounts requests, want none", a)
		}
		if infos, err := c.Users(ctx, r); err != nil || len(infos) != 0 {
			t.Errorf("Users = %v, %v; want none", infos, err)
		}
		// A lazy resource the cluster does not hold as the caller says is
		// refused before anything is written.
		lazy := r
		lazy.Lazy = true
		if _, err := c.Acquire(ctx, lazy, ledger.Request{User: "stranger", Amount: 1}); !errors.Is(err, ledger.ErrResourceMismatch) {
			t.Fatalf("Acquire on a resource said lazy, held not lazy = %v, want ErrResourceMismatch", err)
		}
		if infos, err := c.Users(ctx, r); err != nil || len(infos) != 0 {
			t.Errorf("Users = %v, %v; want none", infos, err)
		}
	})
}

// gated is a cluster whose create_transfers can be held until released,
// so that a test can gather calls behind a request in flight.
type gated struct {
	tb.Client
	armed   atomic.Bool
	held    chan struct{} // closed when a request is held
	release chan struct{}
}

func (g *gated) CreateTransfers(ts []tb.Transfer) ([]tb.CreateTransferResult, error) {
	if g.armed.CompareAndSwap(true, false) {
		close(g.held)
		<-g.release
	}
	return g.Client.CreateTransfers(ts)
}

// patient is a context for calls that must succeed, held behind a batch
// for as long as a loaded machine takes to gather them: longer than a
// Client's default timeout.
func patient(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// behindHeldBatch makes n calls at once (call(i) for each i) behind a batch
// held in flight, so that they go to the cluster together when it is
// released, as calls do behind a request on its way.
func behindHeldBatch(t *testing.T, c *ledger.Client, r ledger.Resource, g *gated, n int, call func(i int)) {
	t.Helper()
	g.armed.Store(true)
	go c.Acquire(patient(t), r, ledger.Request{User: "first", Amount: 1})
	<-g.held
	base := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { call(i) })
	}
	// Let them reach the pipeline (each is a few microseconds of work).
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() < base+n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(g.release)
	wg.Wait()
}

// First sights in flight at once share their requests: one create_accounts
// for all of them, and their credits and holds in one create.
func TestFirstSightsShareRequests(t *testing.T) {
	engine := embedded.New()
	defer engine.Close()
	g := &gated{Client: remote{engine}, held: make(chan struct{}), release: make(chan struct{})}
	c := ledger.New(g)
	r := ledger.Resource{Name: "share", Ledger: 1, Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 3, Lazy: true}
	if err := c.CreateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	if d := acquire(t, c, r, "first", 1); !d.Allowed {
		t.Fatalf("Acquire(first) = %+v", d)
	}
	const n = 16
	before := c.Stats()
	var admitted atomic.Int64
	behindHeldBatch(t, c, r, g, n, func(i int) {
		d, err := c.Acquire(patient(t), r, ledger.Request{User: fmt.Sprint("new", i), Amount: 3})
		if err != nil {
			t.Error(err)
		}
		if d.Allowed && d.Remaining == 0 && d.Limit == 3 {
			admitted.Add(1)
		}
	})
	if admitted.Load() != n {
		t.Fatalf("%d of %d first sights admitted all 3 of 3, want all", admitted.Load(), n)
	}
	a, tr, rd := requests(before, c.Stats())
	if per := float64(a+tr+rd) / n; per > 0.5 || a > 2 {
		t.Errorf("%d first sights at once: %d create_accounts, %d create_transfers, %d reads (%.2f requests a decision), want at most 0.5, in one or two batches", n, a, tr, rd, per)
	}
}

// failing is a cluster whose next create_transfers fails, as if the
// client were closed: the request never reaches the cluster.
type failing struct {
	tb.Client
	fail atomic.Bool
}

func (f *failing) CreateTransfers(ts []tb.Transfer) ([]tb.CreateTransferResult, error) {
	if f.fail.CompareAndSwap(true, false) {
		return nil, tb.ErrClientClosed
	}
	return f.Client.CreateTransfers(ts)
}

// A first sight whose create fails after its accounts were made leaves a
// user that the next decision, of any process, credits and decides: no
// user is left limited to nothing, and no unit is lost or doubled.
func TestFirstSightCutShort(t *testing.T) {
	engine := embedded.New()
	defer engine.Close()
	f := &failing{Client: remote{engine}}
	c := ledger.New(f)
	r := ledger.Resource{Name: "cut", Ledger: 1, Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 3, Lazy: true}
	if err := c.CreateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"cut-short", "a-key-longer-than-sixteen-bytes"} {
		f.fail.Store(true)
		if _, err := c.Acquire(ctx, r, ledger.Request{User: key, Amount: 1}); !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("Acquire(%s) with its create failing = %v, want ErrUnavailable", key, err)
		}
		// Its accounts exist, with no credit: a reader does not take it for
		// a user limited to nothing, and the next decisions provision it.
		other := ledger.New(engine)
		for i, c := range []*ledger.Client{other, c, c, other} {
			d, err := c.Acquire(ctx, r, ledger.Request{User: key, Amount: 1})
			if err != nil {
				t.Fatal(err)
			}
			if want := i < 3; d.Allowed != want || d.Limit != 3 {
				t.Fatalf("Acquire(%s) #%d after the cut = %+v, want allowed %v, limit 3", key, i+1, d, want)
			}
		}
		if u := inspect(t, other, r, key); u.Limit != 3 || u.InFlight != 3 {
			t.Fatalf("Inspect(%s) = %+v, want limit 3, 3 in flight", key, u)
		}
	}
	infos, err := c.Users(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, u := range infos {
		keys = append(keys, u.Key)
	}
	if got := strings.Join(keys, ","); got != "cut-short,a-key-longer-than-sixteen-bytes" {
		t.Errorf("Users = %s, want both keys named", got)
	}
}
