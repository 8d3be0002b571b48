package ledger_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/testenv"
)

// modes are the Client's decision strategies.
var modes = []struct {
	name string
	opts []ledger.Option
}{
	{"plain", nil},
	{"coalescing", []ledger.Option{ledger.WithCoalescing(0)}},
	{"leases", []ledger.Option{ledger.WithLeases(ledger.Leases{})}},
}

// sent is what a Client sent between two Stats: create events and every
// other request.
func sent(before, after ledger.Stats) (creates, reads uint64) {
	creates = after.CreateTransfers.Events - before.CreateTransfers.Events
	reads = after.LookupAccounts.Requests - before.LookupAccounts.Requests +
		after.LookupTransfers.Requests - before.LookupTransfers.Requests +
		after.GetAccountTransfers.Requests - before.GetAccountTransfers.Requests +
		after.QueryAccounts.Requests - before.QueryAccounts.Requests
	return creates, reads
}

// An admission costs one create and a denial at most one (none once the
// user is known to be drained), with no read of its own, in every mode, on
// the path of an in-process engine and on the path of a cluster.
func TestOneCreatePerDecision(t *testing.T) {
	paths := func(t *testing.T, f func(t *testing.T, c func(...ledger.Option) *ledger.Client, b *testenv.Backend)) {
		testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
			f(t, func(o ...ledger.Option) *ledger.Client { return ledger.New(b.Client, o...) }, b)
		})
		t.Run("remote path", func(t *testing.T) {
			f(t, func(o ...ledger.Option) *ledger.Client { return ledger.New(remote{embedded.New()}, o...) }, &testenv.Backend{})
		})
	}
	paths(t, func(t *testing.T, newClient func(...ledger.Option) *ledger.Client, b *testenv.Backend) {
		for _, m := range modes {
			t.Run(m.name, func(t *testing.T) {
				c := newClient(m.opts...)
				led := uint32(1)
				if b.Client != nil {
					led = b.NewLedger()
				}
				r := ledger.Resource{Name: "cost", Ledger: led, Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 5}
				if err := c.CreateResource(ctx, r); err != nil {
					t.Fatal(err)
				}
				users := make([]ledger.UserLimit, 50)
				for i := range users {
					users[i] = ledger.UserLimit{Key: fmt.Sprintf("u%d", i), Limit: 5}
				}
				if err := c.Provision(ctx, r, users...); err != nil {
					t.Fatal(err)
				}
				// Cold users, one decision each.
				before := c.Stats()
				for _, u := range users {
					if d := acquire(t, c, r, u.Key, 1); !d.Allowed || d.Remaining != 4 || d.Limit != 5 {
						t.Fatalf("Acquire(%s) = %+v, want allowed, 4 of 5 left", u.Key, d)
					}
				}
				if creates, reads := sent(before, c.Stats()); creates != 50 || reads != 0 {
					t.Fatalf("50 admissions of cold users: %d creates and %d read requests, want 50 and 0", creates, reads)
				}
				// One user drained: 4 admissions, one denial sent, then none.
				before = c.Stats()
				for i := 0; i < 4; i++ {
					if d := acquire(t, c, r, "u0", 1); !d.Allowed || d.Remaining != uint64(3-i) {
						t.Fatalf("Acquire #%d = %+v, want %d left", i+2, d, 3-i)
					}
				}
				for i := 0; i < 50; i++ {
					if d := acquire(t, c, r, "u0", 1); d.Allowed || d.Reason != ledger.LimitExceeded || d.RetryAfter <= 0 || d.RetryAfter > time.Hour {
						t.Fatalf("denial #%d = %+v", i+1, d)
					}
				}
				creates, reads := sent(before, c.Stats())
				if m.name == "leases" {
					creates = min(creates, 5) // a lease may end with a give-back
				}
				if creates > 5 || reads > 1 {
					t.Fatalf("4 admissions and 50 denials of one user: %d creates and %d reads, want at most 5 and 1", creates, reads)
				}
			})
		}
	})
}

// Under concurrent load on many users, a decision still costs about one
// create: the reads that keep views true stay within their budget.
func TestOneCreatePerDecisionUnderLoad(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c := ledger.New(remote{embedded.New()}, m.opts...)
			r := ledger.Resource{Name: "load", Ledger: 1, Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 20, Lazy: true}
			if err := c.CreateResource(ctx, r); err != nil {
				t.Fatal(err)
			}
			users := make([]ledger.UserLimit, 200)
			for i := range users {
				users[i] = ledger.UserLimit{Key: fmt.Sprintf("u%d", i), Limit: 20}
			}
			if err := c.Provision(ctx, r, users...); err != nil {
				t.Fatal(err)
			}
			before := c.Stats()
			var wg sync.WaitGroup
			var mu sync.Mutex
			admitted := 0
			for g := 0; g < 32; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 100; i++ {
						key := users[(g*7+i*i)%len(users)].Key
						d, err := c.Acquire(ctx, r, ledger.Request{User: key, Amount: 1})
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							mu.Lock()
							admitted++
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			after := c.Stats()
			creates, _ := sent(before, after)
			lookups := after.LookupAccounts.Events - before.LookupAccounts.Events
			scans := after.GetAccountTransfers.Requests - before.GetAccountTransfers.Requests
			t.Logf("%d admitted of 3200: %d creates, %d accounts read, %d scans", admitted, creates, lookups, scans)
			if admitted == 0 || admitted == 3200 {
				t.Fatalf("%d admitted: the test must see both admissions and denials", admitted)
			}
			if float64(creates) > 1.1*float64(admitted) || lookups > 3200/16+1 || scans != 0 {
				t.Fatalf("%d admissions cost %d creates, %d accounts read, %d scans", admitted, creates, lookups, scans)
			}
		})
	}
}
