package ledger_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/testenv"
)

// quick is a model of a cluster that answers in about half a millisecond.
var quick = simnet.Model{Name: "quick", RoundTrip: 300 * time.Microsecond}

// world is a cluster (the embedded engine behind a simulated network) with
// a request resource, a money resource and funded users.
type world struct {
	engine tb.Client
	sim    *simnet.Client
	req    ledger.Resource
	money  ledger.Resource
	users  []string
}

func newWorld(t *testing.T, seed uint64, users int) *world {
	t.Helper()
	e := embedded.New()
	t.Cleanup(e.Close)
	return newWorldOn(t, &testenv.Backend{Client: e}, seed, users, 1)
}

// newWorldOn builds a world on backend b's cluster, on ledgers from first
// (or new ones, when first is 0).
func newWorldOn(t *testing.T, b *testenv.Backend, seed uint64, users int, first uint32) *world {
	t.Helper()
	w := &world{engine: b.Client}
	w.sim = simnet.New(w.engine, quick, simnet.WithSeed(seed))
	t.Cleanup(w.sim.Close)
	setupClient := ledger.New(w.engine)
	ledgers := []uint32{first, first + 1, first + 2}
	if first == 0 {
		ledgers = []uint32{b.NewLedger(), b.NewLedger(), b.NewLedger()}
	}
	w.req = ledger.Resource{Name: "req", Ledger: ledgers[0], Kind: ledger.KindRequests, Window: 2 * time.Second, DefaultLimit: 20, Lazy: true}
	w.money = ledger.Resource{Name: "usd", Ledger: ledgers[1], Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 500, Currency: ledgers[2]}
	for _, r := range []ledger.Resource{w.req, w.money} {
		if err := setupClient.CreateResource(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range users {
		w.users = append(w.users, fmt.Sprintf("u%d", i))
		if err := setupClient.Provision(ctx, w.money, ledger.UserLimit{Key: w.users[i], Limit: 500}); err != nil {
			t.Fatal(err)
		}
		if err := setupClient.Fund(ctx, w.money.Currency, ledger.Request{User: w.users[i], Amount: 10_000}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// call is one request a caller makes: its kind, and its ID.
type call struct {
	kind   int // 0 acquire, 1 two-hold chain, 2 payment, 3 reservation
	user   string
	to     string
	amount uint64
	id     ledger.ID
}

func (w *world) do(ctx context.Context, c *ledger.Client, k call) (allowed bool, err error) {
	switch k.kind {
	case 0:
		d, err := c.Acquire(ctx, w.req, ledger.Request{User: k.user, Amount: k.amount, ID: k.id})
		return d.Allowed, err
	case 1:
		ds, err := c.AcquireAll(ctx, []ledger.Part{
			{Resource: w.req, Request: ledger.Request{User: k.user, Amount: k.amount, ID: k.id}},
			{Resource: w.money, Request: ledger.Request{User: k.user, Amount: k.amount}},
		})
		return len(ds) > 0 && ds[0].Allowed, err
	case 2:
		d, err := c.Pay(ctx, w.money, ledger.Payment{From: k.user, To: k.to, Amount: k.amount, ID: k.id})
		return d.Allowed, err
	default:
		rv, err := c.Reserve(ctx, w.req, ledger.Request{User: k.user, Amount: k.amount, ID: k.id})
		return rv != nil && rv.OK(), err
	}
}

// Every call returns within its deadline, in every mode and for every kind
// of call, while the cluster stalls, loses requests and replies, and is
// slow; what the cluster recorded then holds no user over its limit.
func TestDeadlinesUnderFaults(t *testing.T) {
	const deadline = 150 * time.Millisecond
	const noise = 250 * time.Millisecond // scheduling on a busy 2-core machine, -race
	late := testenv.WatchLateness(t)     // more, on a busier one
	for _, m := range modes {
		lossy := simnet.Faults{DropRequest: 0.2, DropReply: 0.2, Delay: 100 * time.Millisecond, Hold: 300 * time.Millisecond}
		for _, f := range []struct {
			name   string
			faults simnet.Faults
			policy ledger.OnUnavailable
		}{
			{"stalled", simnet.Faults{Stall: true}, ledger.ReturnError},
			{"lossy", lossy, ledger.ReturnError},
			// Admitted by the policy, a call's answer may come after it
			// returned: what it returned must not depend on it.
			{"lossy, fail open", lossy, ledger.FailOpen},
		} {
			t.Run(m.name+"/"+f.name, func(t *testing.T) {
				w := newWorld(t, 7, 8)
				c := ledger.New(w.sim, slices.Concat(m.opts, []ledger.Option{ledger.WithUnavailable(f.policy)})...)
				w.sim.SetFaults(f.faults)
				var worst atomic.Int64
				var answered, unavailable atomic.Int64
				var wg sync.WaitGroup
				for g := range 16 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range 6 {
							k := call{kind: (g + i) % 4, user: w.users[g%len(w.users)], to: w.users[(g+1)%len(w.users)], amount: 1}
							cctx, cancel := context.WithTimeout(context.Background(), deadline)
							start := time.Now()
							_, err := w.do(cctx, c, k)
							took := time.Since(start)
							cancel()
							for {
								old := worst.Load()
								if int64(took) <= old || worst.CompareAndSwap(old, int64(took)) {
									break
								}
							}
							switch {
							case err == nil:
								answered.Add(1)
							case errors.Is(err, ledger.ErrUnavailable):
								unavailable.Add(1)
							default:
								t.Errorf("%+v: %v", k, err)
							}
						}
					}()
				}
				wg.Wait()
				t.Logf("%d answered, %d unavailable; slowest call %v", answered.Load(), unavailable.Load(), time.Duration(worst.Load()))
				if time.Duration(worst.Load()) > deadline+late.Allowance(noise) {
					t.Errorf("a call took %v with a deadline of %v (timers here fired up to %v late)", time.Duration(worst.Load()), deadline, late.Worst())
				}
				if f.faults.Stall && answered.Load() > 0 {
					t.Errorf("%d calls answered by a stalled cluster", answered.Load())
				}
				w.sim.SetFaults(simnet.Faults{}) // the cluster answers again
				w.auditAll(t, ledger.New(w.engine))
			})
		}
	}
}

// auditAll checks what the cluster recorded for every user: no window over
// the limit, nothing in flight over it.
func (w *world) auditAll(t *testing.T, c *ledger.Client) {
	t.Helper()
	for _, r := range []ledger.Resource{w.req, w.money} {
		for _, u := range w.users {
			a, err := c.Audit(ctx, r, u, time.Time{}, time.Time{})
			if errors.Is(err, ledger.ErrUnknownUser) {
				continue // a lazy user never provisioned
			}
			if err != nil {
				t.Fatal(err)
			}
			if !a.OK() {
				t.Errorf("%s on %s: %+v", u, r.Name, a)
			}
		}
	}
}

// Under lost requests, lost replies, duplicates and delays, callers that
// retry by ID until they get an answer get one answer per request, and
// what the cluster recorded agrees: every request answered admitted is
// recorded exactly once, none answered denied is recorded, no window holds
// more than the limit, and every payment moved its money exactly once or not
// at all.
func TestRequestIDsUnderFaults(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		for _, m := range modes {
			t.Run(m.name, func(t *testing.T) {
				requestIDsUnderFaults(t, newWorldOn(t, b, 11, 6, 0), m.opts)
			})
		}
	})
}

func requestIDsUnderFaults(t *testing.T, w *world, opts []ledger.Option) {
	w.sim.SetFaults(simnet.Faults{DropRequest: 0.05, DropReply: 0.08, Duplicate: 0.15, Delay: 5 * time.Millisecond, Hold: 50 * time.Millisecond})
	clients := []*ledger.Client{ledger.New(w.sim, opts...), ledger.New(w.sim, opts...)}
	answers := w.hammerWithIDs(t, clients, 8, 12)
	w.sim.SetFaults(simnet.Faults{})
	if err := w.checkRecorded(answers); err != nil {
		t.Fatal(err)
	}
	w.auditAll(t, ledger.New(w.engine))
}

// The check above catches a cluster that lies: one that answers created
// for some holds it refused.
func TestRequestIDsCheckCatchesALie(t *testing.T) {
	w := newWorld(t, 13, 3)
	clients := []*ledger.Client{ledger.New(&liar{Client: w.sim})}
	answers := w.hammerWithIDs(t, clients, 4, 30)
	if err := w.checkRecorded(answers); err == nil {
		t.Fatal("the check found nothing wrong with a cluster that admits what it refused")
	} else {
		t.Logf("caught: %v", err)
	}
}

// liar answers created for every third transfer the cluster refused for
// want of units.
type liar struct {
	tb.Client
	mu sync.Mutex
	n  int
}

func (l *liar) CreateTransfers(ts []tb.Transfer) ([]tb.CreateTransferResult, error) {
	res, err := l.Client.CreateTransfers(ts)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range res {
		if res[i].Status == tb.TransferExceedsCredits {
			if l.n++; l.n%3 == 0 {
				res[i].Status = tb.TransferCreated
			}
		}
	}
	return res, err
}

// hammerWithIDs has callers make requests under IDs, each retried with its
// ID until it is answered, and returns the final answer of each.
func (w *world) hammerWithIDs(t *testing.T, clients []*ledger.Client, callers, calls int) map[ledger.ID]answer {
	t.Helper()
	var mu sync.Mutex
	answers := map[ledger.ID]answer{}
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := range calls {
				k := call{kind: rng.IntN(4), user: w.users[rng.IntN(len(w.users))], amount: 1 + rng.Uint64N(3),
					id: ledger.KeyID(fmt.Sprintf("%d/%d/%d", w.req.Ledger, g, i))}
				k.to = w.users[(indexOf(w.users, k.user)+1)%len(w.users)]
				allowed, err := w.retry(clients, g, k)
				if err != nil {
					t.Errorf("%+v: %v", k, err)
					return
				}
				mu.Lock()
				answers[k.id] = answer{call: k, allowed: allowed}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return answers
}

type answer struct {
	call    call
	allowed bool
}

// retry makes request k until it gets an answer, from alternating clients
// (a retry may come from another process), with a deadline too short for a
// lost request or reply.
func (w *world) retry(clients []*ledger.Client, g int, k call) (bool, error) {
	var err error
	for try := 0; try < 200; try++ {
		cctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
		var allowed bool
		allowed, err = w.do(cctx, clients[(g+try)%len(clients)], k)
		cancel()
		if !errors.Is(err, ledger.ErrUnavailable) {
			return allowed, err
		}
	}
	return false, fmt.Errorf("no answer after 200 tries: %w", err)
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// checkRecorded compares the answers with what the engine recorded: the
// holds and payments that carry each request's ID (as their own ID, or in
// user_data_128 for later attempts under it).
func (w *world) checkRecorded(answers map[ledger.ID]answer) error {
	recorded := map[ledger.ID]map[uint32]int{} // request -> ledger -> holds (or payments) recorded
	paid := map[string]uint64{}
	for _, l := range []uint32{w.req.Ledger, w.money.Ledger, w.money.Currency} {
		f := tb.QueryFilter{Ledger: l, Limit: 8189}
		for {
			ts, err := w.engine.QueryTransfers(f)
			if err != nil {
				return err
			}
			for _, t := range ts {
				if t.Code != 10 && t.Code != 14 && t.Code != 20 && t.Code != 21 { // holds, reservations, payment holds, payments
					continue
				}
				if t.Code != 21 && !t.TransferFlags().Pending {
					continue
				}
				for _, id := range []ledger.ID{ledger.ID(t.ID.Bytes()), ledger.ID(t.UserData128.Bytes())} {
					if _, ok := answers[id]; ok {
						if recorded[id] == nil {
							recorded[id] = map[uint32]int{}
						}
						recorded[id][l]++
						break
					}
				}
				if t.Code == 21 {
					amount := t.Amount.Bytes()
					paid[fmt.Sprint(t.DebitAccountID)] += binary.LittleEndian.Uint64(amount[:8])
				}
			}
			if len(ts) < int(f.Limit) {
				break
			}
			f.TimestampMin = ts[len(ts)-1].Timestamp + 1
		}
	}
	var want map[string]uint64 = map[string]uint64{}
	for id, a := range answers {
		n := recorded[id]
		switch {
		case a.allowed && a.call.kind == 1 && (n[w.req.Ledger] != 1 || n[w.money.Ledger] != 1):
			return fmt.Errorf("request %s (%+v) answered admitted, recorded %v", id, a.call, n)
		case a.allowed && a.call.kind == 2 && (n[w.money.Ledger] != 1 || n[w.money.Currency] != 1):
			return fmt.Errorf("payment %s (%+v) answered paid, recorded %v", id, a.call, n)
		case a.allowed && (a.call.kind == 0 || a.call.kind == 3) && n[w.req.Ledger] != 1:
			return fmt.Errorf("request %s (%+v) answered admitted, recorded %v", id, a.call, n)
		case !a.allowed && len(n) > 0:
			return fmt.Errorf("request %s (%+v) answered denied, recorded %v", id, a.call, n)
		}
		if a.allowed && a.call.kind == 2 {
			want[fmt.Sprint(tb.BytesToUint128(ledger.CurrencyUserID(w.money.Currency, a.call.user)))] += a.call.amount
		}
	}
	for acct, amount := range want {
		if paid[acct] != amount {
			return fmt.Errorf("account %s paid %d in all, its paid answers say %d", acct, paid[acct], amount)
		}
	}
	for acct, amount := range paid {
		if want[acct] != amount {
			return fmt.Errorf("account %s paid %d in all, its paid answers say %d", acct, amount, want[acct])
		}
	}
	return nil
}
