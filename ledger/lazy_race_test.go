package ledger_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/testenv"
)

// Many callers' first decisions of lazy users, at once, over a network:
// a user's account is created, then credited its limit, two requests
// apart, and a hold or a read that comes between them must not be taken
// for a user limited to nothing. Every user is admitted exactly what it
// asked, up to its limit, with and without a plan.
func TestFirstDecisionsOfLazyUsersAtOnce(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		for _, plan := range []uint64{0, 10} {
			_, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 10 - plan, Lazy: true})
			decideAtOnce(t, b, r, 1, plan)
		}
	})
}

// Two processes meeting the same new keys at the same instants, over a
// network, admit exactly each key's limit between them: each provisions
// the key (once, whichever comes first) and no hold comes before a credit.
func TestTwoProcessesMeetNewKeys(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		_, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 10, Lazy: true})
		decideAtOnce(t, b, r, 2, 0)
	})
}

// decideAtOnce has 256 callers, spread over the given number of Clients
// (processes), decide 12 times each on Zipf-drawn keys of lazy resource r
// (limit 10, or plan), and checks that every key admitted exactly what was
// asked of it, up to 10.
func decideAtOnce(t *testing.T, b *testenv.Backend, r ledger.Resource, processes int, plan uint64) {
	t.Helper()
	clients := make([]*ledger.Client, processes)
	for i := range clients {
		if b.Real {
			clients[i] = ledger.New(b.Client, ledger.WithNow(b.Now))
		} else { // the engine behind a real client's costs: requests interleave as on a cluster
			sc := simnet.New(b.Client, simnet.RealServer0179)
			t.Cleanup(sc.Close)
			clients[i] = ledger.New(sc, ledger.WithNow(b.Now))
		}
	}
	var mu sync.Mutex
	asked, admitted := map[string]int{}, map[string]int{}
	var wg sync.WaitGroup
	for caller := range 256 {
		c := clients[caller%processes]
		wg.Go(func() {
			// Callers of different Clients draw the same keys at once.
			z := rand.NewZipf(rand.New(rand.NewPCG(uint64(caller/processes), 1)), 1.1, 1, 63)
			for range 12 {
				u := fmt.Sprint("u", z.Uint64())
				d, err := c.Acquire(ctx, r, ledger.Request{User: u, Amount: 1, Limit: plan})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				asked[u]++
				if d.Allowed {
					admitted[u]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for u, n := range asked {
		if want := min(n, 10); admitted[u] != want {
			t.Errorf("%d processes, plan %d: user %s: %d admitted of %d asked, want %d", processes, plan, u, admitted[u], n, want)
		}
	}
}
