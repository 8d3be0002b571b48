package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/testenv"
)

// Payments authorized, then captured or released, by callers that retry
// each step under the authorization's request ID (from either of two
// Clients) while the cluster loses requests and replies and delivers some
// twice: money moves once, only what was captured, never past what was
// authorized and never when released, and every authorization ends.
func TestAuthorizeUnderFaults(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		w := newWorldOn(t, b, 17, 6, 0)
		w.sim.SetFaults(simnet.Faults{DropRequest: 0.05, DropReply: 0.1, Duplicate: 0.15, Delay: 5 * time.Millisecond, Hold: 50 * time.Millisecond})
		clients := []*ledger.Client{ledger.New(w.sim), ledger.New(w.sim)}
		var mu sync.Mutex
		moved := map[string]int64{} // by user: what it received less what it paid
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 5))
				for i := range 10 {
					from := w.users[rng.IntN(len(w.users))]
					to := w.users[(indexOf(w.users, from)+1)%len(w.users)]
					p := ledger.Payment{From: from, To: to, Amount: 1 + rng.Uint64N(60), ID: ledger.KeyID(b.Key(fmt.Sprintf("auth/%d/%d", g, i)))}
					rv, err := authorizeRetried(clients, g, w.money, p)
					if err != nil {
						t.Errorf("authorize %+v: %v", p, err)
						return
					}
					if !rv.OK() {
						continue // over the limit: nothing held
					}
					n := rng.Uint64N(p.Amount + 1) // 0: release
					if err := endRetried(clients, g, rv.Hold(), n); err != nil {
						t.Errorf("end %+v with %d: %v", p, n, err)
						return
					}
					mu.Lock()
					moved[from] -= int64(n)
					moved[to] += int64(n)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		w.sim.SetFaults(simnet.Faults{})
		check := ledger.New(w.engine)
		for _, u := range w.users {
			f, err := check.Funds(context.Background(), w.money.Currency, u)
			if err != nil {
				t.Fatal(err)
			}
			if want := 10_000 + moved[u]; int64(f) != want {
				t.Errorf("%s holds %d, want %d: 10,000 and what it was paid less what it paid, once each", u, f, want)
			}
		}
		w.auditAll(t, check)
	})
}

// authorizeRetried authorizes p until it is answered, from alternating
// Clients, with deadlines too short for a lost request or reply.
func authorizeRetried(clients []*ledger.Client, g int, r ledger.Resource, p ledger.Payment) (*ledger.Reservation, error) {
	var err error
	for try := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
		var rv *ledger.Reservation
		rv, err = clients[(g+try)%len(clients)].Authorize(ctx, r, p)
		cancel()
		if !errors.Is(err, ledger.ErrUnavailable) {
			return rv, err
		}
	}
	return nil, fmt.Errorf("no answer after 200 tries: %w", err)
}

// endRetried captures n of the authorization whose hold is hold (releases
// it when n is 0) until answered, finding it again by its hold from
// alternating Clients: a try is several requests in a row (the hold, its
// payment, its resource and user, then the end), so its deadline is longer
// than one request's.
func endRetried(clients []*ledger.Client, g int, hold ledger.ID, n uint64) error {
	var err error
	for try := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		var rv *ledger.Reservation
		if rv, err = clients[(g+try)%len(clients)].Reservation(ctx, hold); err == nil {
			if n == 0 {
				err = rv.Cancel(ctx)
			} else {
				err = rv.CommitN(ctx, n)
			}
		}
		cancel()
		if !errors.Is(err, ledger.ErrUnavailable) {
			return err
		}
	}
	return fmt.Errorf("no answer after 200 tries: %w", err)
}
