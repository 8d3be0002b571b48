package ledger_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/testenv"
)

// A Client that never got an answer says so, apart from one whose cluster
// stopped answering, and answers once the cluster does.
func TestNeverAnsweredSaysWhy(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		if b.Real {
			t.Skip("a refused connection is simulated (see TestFleetBeyondConnectionLimit for a real server)")
		}
		_, r := setup(t, b, ledger.Resource{Window: time.Minute, DefaultLimit: 10, Lazy: true})
		// A network that holds every request, as a replica that shut the
		// connection down does to a client that retries for ever.
		sc := simnet.New(b.Client, simnet.Model{Name: "free"}, simnet.WithFaults(simnet.Faults{Stall: true}))
		t.Cleanup(sc.Close)
		c := ledger.New(sc, ledger.WithTimeout(50*time.Millisecond))
		_, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1})
		if !errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), "no answer since this Client started") ||
			!strings.Contains(err.Error(), "32 client connections") {
			t.Fatalf("Acquire with no connection = %v, want ErrUnavailable saying the cluster never answered, and why", err)
		}
		if s := c.Stats(); s.Unanswered != 1 || s.NeverAnswered != 1 {
			t.Errorf("Stats = %d unanswered, %d never answered; want 1, 1", s.Unanswered, s.NeverAnswered)
		}
		sc.SetFaults(simnet.Faults{}) // a connection frees
		// The Client's 50 ms bounds the calls meant to fail; this one is to succeed.
		long, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if d, err := c.Acquire(long, r, ledger.Request{User: "u", Amount: 1}); err != nil || !d.Allowed {
			t.Fatalf("Acquire once the cluster answers = %+v, %v; want admitted", d, err)
		}
		sc.SetFaults(simnet.Faults{Stall: true}) // then it stops answering
		_, err = c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1})
		if !errors.Is(err, ledger.ErrUnavailable) || strings.Contains(err.Error(), "since this Client started") {
			t.Errorf("Acquire from a cluster that stopped answering = %v, want ErrUnavailable, not 'never answered'", err)
		}
		if s := c.Stats(); s.Unanswered != 2 || s.NeverAnswered != 1 {
			t.Errorf("Stats = %d unanswered, %d never answered; want 2, 1", s.Unanswered, s.NeverAnswered)
		}
		sc.SetFaults(simnet.Faults{})
	})
}

// A Client whose session the cluster evicted opens a new one and sends the
// call again, by its ID: it counts once.
func TestEvictedSessionReconnects(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		if b.Real {
			t.Skip("eviction is simulated (a real cluster evicts the 65th session)")
		}
		_, r := setup(t, b, ledger.Resource{Window: time.Minute, DefaultLimit: 10, Lazy: true})
		first := simnet.New(b.Client, simnet.Model{Name: "free"})
		t.Cleanup(first.Close)
		var dials atomic.Int32
		c := ledger.New(first, ledger.WithTimeout(10*time.Second), ledger.WithReconnect(func() (tb.Client, error) {
			dials.Add(1)
			return simnet.New(b.Client, simnet.Model{Name: "free"}), nil
		}))
		t.Cleanup(c.Close)
		if d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1}); err != nil || !d.Allowed {
			t.Fatalf("first Acquire = %+v, %v", d, err)
		}
		first.SetFaults(simnet.Faults{Evict: true})
		id := ledger.KeyID(b.Key("request"))
		for i := range 2 {
			if d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 2, ID: id}); err != nil || !d.Allowed || d.ID != id {
				t.Fatalf("Acquire #%d under %s after the eviction = %+v, %v; want admitted", i+1, id, d, err)
			}
		}
		if got := dials.Load(); got != 1 || c.Stats().Reconnects != 1 || first.Stats().Evicted == 0 {
			t.Errorf("dials %d, Stats.Reconnects %d, evicted requests %d; want 1, 1, at least 1", got, c.Stats().Reconnects, first.Stats().Evicted)
		}
		if u := inspect(t, c, r, "u"); u.InFlight != 3 {
			t.Errorf("in flight %d, want 3: 1, then 2 once under the ID", u.InFlight)
		}
	})
}
