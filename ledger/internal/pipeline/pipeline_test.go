package pipeline_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/ledger/internal/conn"
	"github.com/tblimit/tblimit/ledger/internal/pipeline"
	"github.com/tblimit/tblimit/ledger/internal/status"
)

// The pipeline is tested here on its own, with a host that keeps no view:
// it records what the runner hands it, and its decisions say only what the
// answers said. What a Client makes of them is package ledger's tests'.

const ledgerID = 1

var operator = tb.ToUint128(1)

// user is a test host's user: one limit account.
type user struct {
	id tb.Uint128

	mu      sync.Mutex
	settled []tb.CreateTransferStatus // the results of its holds, as the runner handed them over
	sighted int                       // answers to its sights the runner handed over
}

// decision is a test host's decision: what the answer said.
type decision struct {
	admitted bool
	name     tb.Uint128 // the request's key, else the hold's ID
	at       uint64
}

// host is a pipeline.Host that keeps no view.
type host struct {
	t      *testing.T
	ids    atomic.Uint64
	merged atomic.Int64 // merged transfers made
	in     atomic.Int64 // calls that went in them
	reads  atomic.Int64 // users read for checks
	limits map[*user]uint64
	mu     sync.Mutex
}

func (h *host) Nows() (int64, uint64) {
	now := time.Now().UnixNano()
	return now, uint64(now)
}
func (h *host) Clock(uint64, int64) {}
func (h *host) ReadsDue() bool      { return false }
func (h *host) Refresh()            {}
func (h *host) Read(_ context.Context, us []*user) error {
	h.reads.Add(int64(len(us)))
	return nil
}
func (h *host) Check(ch pipeline.Check[*user], _ uint64) (decision, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return decision{admitted: ch.Amount <= h.limits[ch.User]}, nil
}
func (h *host) Accounts(u *user) []tb.Account {
	return []tb.Account{{ID: u.id, Ledger: ledgerID, Code: 1, Flags: tb.AccountFlags{DebitsMustNotExceedCredits: true}.ToUint16()}}
}
func (h *host) AccountError(u *user, i int, s tb.CreateAccountStatus) error {
	return fmt.Errorf("account %d: %v", i, s)
}
func (h *host) Credit(u *user, limit uint64) tb.Transfer {
	return tb.Transfer{ID: credit(u), DebitAccountID: operator, CreditAccountID: u.id, Amount: tb.ToUint128(limit), Ledger: ledgerID, Code: 1}
}
func (h *host) Sighted(u *user, _ uint64, account tb.CreateAccountStatus, cr tb.CreateTransferResult, _ int64) {
	if status.ClassifyCredit(cr.Status) != status.CreditNow {
		h.t.Errorf("credit of a sight answered %v", cr.Status)
	}
	u.mu.Lock()
	u.sighted++
	u.mu.Unlock()
}
func (h *host) Settle(events []pipeline.Event[*user], chain []tb.Transfer, res []tb.CreateTransferResult, out pipeline.Outcome, _ int64, ds []decision) []decision {
	for _, e := range events {
		e.User.mu.Lock()
		e.User.settled = append(e.User.settled, res[e.I].Status)
		e.User.mu.Unlock()
		if e.Decide && out.Decided {
			ds = append(ds, describe(chain[e.I], res[e.I], out))
		}
	}
	return ds
}
func (h *host) Describe(events []pipeline.Event[*user], chain []tb.Transfer, res []tb.CreateTransferResult, out pipeline.Outcome, ds []decision) {
	k := 0
	for _, e := range events {
		if e.Decide {
			ds[k] = describe(chain[e.I], res[e.I], out)
			k++
		}
	}
}
func (h *host) Merge(u *user, amounts []uint64, in, _ []bool, _ []decision) tb.Transfer {
	var total uint64
	for i, a := range amounts {
		in[i], total = true, total+a
	}
	if len(amounts) < 2 {
		return tb.Transfer{}
	}
	h.merged.Add(1)
	h.in.Add(int64(len(amounts)))
	return hold(h.NewID(), u, total)
}
func (h *host) SettleMerged(u *user, t *tb.Transfer, s tb.CreateTransferResult, amounts []uint64, _ int64, ds []decision) {
	u.mu.Lock()
	u.settled = append(u.settled, s.Status)
	u.mu.Unlock()
	for i := range ds {
		ds[i] = decision{admitted: true, name: t.ID, at: s.Timestamp}
	}
}
func (h *host) Marker(key tb.Uint128, _ []tb.Transfer) tb.Transfer {
	return tb.Transfer{ID: key, DebitAccountID: operator, CreditAccountID: tb.ToUint128(2), Ledger: ledgerID, Code: 1,
		Flags: tb.TransferFlags{Linked: true}.ToUint16()}
}
func (h *host) NewID() tb.Uint128 { return tb.ToUint128(1<<40 + h.ids.Add(1)) }

func describe(t tb.Transfer, s tb.CreateTransferResult, out pipeline.Outcome) decision {
	name := t.ID
	if out.Key != (tb.Uint128{}) {
		name = out.Key
	}
	return decision{admitted: !out.Failed, name: name, at: s.Timestamp}
}

func credit(u *user) tb.Uint128 {
	b := u.id.Bytes()
	b[15] = 0xcc
	return tb.BytesToUint128(b)
}

func hold(id tb.Uint128, u *user, amount uint64) tb.Transfer {
	return tb.Transfer{ID: id, DebitAccountID: u.id, CreditAccountID: operator, Amount: tb.ToUint128(amount), Ledger: ledgerID, Code: 1,
		Timeout: 3600, Flags: tb.TransferFlags{Pending: true}.ToUint16()}
}

type fixture struct {
	h *host
	c *conn.Conn
	p *pipeline.Pipeline[*user, decision]
}

// newFixture starts a pipeline on an embedded engine that holds the
// operator's account, the marker's credit account and, funded with limit
// units each, users n users.
func newFixture(t *testing.T, cfg pipeline.Config, n int, limit uint64) (*fixture, []*user) {
	t.Helper()
	f := &fixture{h: &host{t: t, limits: map[*user]uint64{}}, c: conn.New(embedded.New()), p: new(pipeline.Pipeline[*user, decision])}
	t.Cleanup(f.c.Close)
	ctx := context.Background()
	accounts := []tb.Account{{ID: operator, Ledger: ledgerID, Code: 1}, {ID: tb.ToUint128(2), Ledger: ledgerID, Code: 1}}
	var us []*user
	for i := range n {
		u := &user{id: tb.ToUint128(uint64(1000 + i))}
		us = append(us, u)
		f.h.limits[u] = limit
		accounts = append(accounts, f.h.Accounts(u)...)
	}
	if res, err := f.c.CreateAccounts(ctx, accounts); err != nil || !allMade(res) {
		t.Fatal(res, err)
	}
	var credits []tb.Transfer
	for _, u := range us {
		credits = append(credits, f.h.Credit(u, limit))
	}
	if len(credits) > 0 {
		if res, err := f.c.CreateTransfers(ctx, credits); err != nil || res[0].Status != tb.TransferCreated {
			t.Fatal(res, err)
		}
	}
	f.p.Start(f.h, f.c, cfg)
	return f, us
}

func allMade(res []tb.CreateAccountResult) bool {
	for _, r := range res {
		if !status.AccountMade(r.Status) {
			return false
		}
	}
	return true
}

// acquire holds amount units of u through the pipeline and returns the
// op's decision. It may be called from any goroutine.
func (f *fixture) acquire(t *testing.T, u *user, amount uint64, spec pipeline.Spec) decision {
	t.Helper()
	steps := []pipeline.Step[*user]{{T: hold(f.h.NewID(), u, amount), User: u, Decide: true}}
	o := f.p.New(spec, steps)
	if err := f.p.Submit(context.Background(), o); err != nil {
		t.Error(err)
		return decision{}
	}
	if o.Retry || len(o.Ds) != 1 {
		t.Errorf("an answered hold: retry %v, %d decisions", o.Retry, len(o.Ds))
		return decision{}
	}
	o.Answered = true
	d := o.Ds[0]
	f.p.Free(o)
	return d
}

// TestSettleHandsOverEveryResult sends holds from many goroutines: each
// gets one decision, which says what the engine answered, and each user's
// host sees each of its holds settled once, the admitted ones within its
// limit.
func TestSettleHandsOverEveryResult(t *testing.T) {
	const users, callers, calls, limit = 4, 16, 20, 100
	f, us := newFixture(t, pipeline.Config{}, users, limit)
	var admitted [users]atomic.Uint64
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				k := (c + i) % users
				if d := f.acquire(t, us[k], 3, pipeline.Spec{}); d.admitted {
					admitted[k].Add(3)
				}
			}
		})
	}
	wg.Wait()
	for k, u := range us {
		created := 0
		for _, s := range u.settled {
			if s == tb.TransferCreated {
				created++
			}
		}
		if len(u.settled) != callers*calls/users {
			t.Errorf("user %d: %d holds settled, want %d", k, len(u.settled), callers*calls/users)
		}
		if got := admitted[k].Load(); got != uint64(3*created) || got != limit/3*3 {
			t.Errorf("user %d: %d units admitted by decisions, %d holds created, limit %d", k, got, created, limit)
		}
	}
}

// TestNamedByKey: a request with a caller's key is named by it; without,
// by its hold's ID.
func TestNamedByKey(t *testing.T) {
	f, us := newFixture(t, pipeline.Config{}, 1, 10)
	key := tb.ToUint128(77)
	if d := f.acquire(t, us[0], 1, pipeline.Spec{Key: key}); d.name != key || !d.admitted {
		t.Errorf("with a key: %+v", d)
	}
	if d := f.acquire(t, us[0], 1, pipeline.Spec{}); d.name == key || d.name == (tb.Uint128{}) {
		t.Errorf("without a key: %+v", d)
	}
}

// TestProvisionAhead: an op that provisions its user creates the user's
// account in a create_accounts ahead of its create, and its credit ahead of
// its hold in the create itself.
func TestProvisionAhead(t *testing.T) {
	f, _ := newFixture(t, pipeline.Config{}, 0, 0)
	u := &user{id: tb.ToUint128(5000)}
	before := f.c.Stats()
	steps := []pipeline.Step[*user]{{T: hold(f.h.NewID(), u, 4), User: u, Decide: true}}
	o := f.p.New(pipeline.Spec{Merge: true}, steps)
	o.Provision(u, 10)
	if o.Merge {
		t.Error("an op that provisions may be merged")
	}
	if err := f.p.Submit(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(o.Ds) != 1 || !o.Ds[0].admitted {
		t.Fatalf("decisions %+v, results %+v", o.Ds, o.Res)
	}
	after := f.c.Stats()
	if n := after.CreateAccounts.Requests - before.CreateAccounts.Requests; n != 1 {
		t.Errorf("%d create_accounts, want 1", n)
	}
	if n := after.CreateTransfers.Events - before.CreateTransfers.Events; n != 2 {
		t.Errorf("%d transfers created, want 2 (the credit, then the hold)", n)
	}
	if u.sighted != 1 {
		t.Errorf("sight handed over %d times, want 1", u.sighted)
	}
	// A second hold, not provisioning, finds the account credited.
	if d := f.acquire(t, u, 6, pipeline.Spec{}); !d.admitted {
		t.Errorf("the rest of the credited limit: %+v", d)
	}
	if d := f.acquire(t, u, 1, pipeline.Spec{}); d.admitted {
		t.Errorf("past the credited limit: %+v", d)
	}
}

// TestCoalesce: with coalescing, the holds of one user that meet in a
// batch go in one merged transfer, and each gets its decision; a failure
// of the merged transfer would send them again alone. The batch is held
// back so that the calls meet.
func TestCoalesce(t *testing.T) {
	f, us := newFixture(t, pipeline.Config{Coalesce: true, Gather: 20 * time.Millisecond}, 1, 1000)
	const callers = 8
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for range callers {
		wg.Go(func() {
			if d := f.acquire(t, us[0], 5, pipeline.Spec{Merge: true}); d.admitted {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if admitted.Load() != callers {
		t.Errorf("%d of %d calls admitted", admitted.Load(), callers)
	}
	holds := len(us[0].settled)
	if want := callers - int(f.h.in.Load()) + int(f.h.merged.Load()); holds != want {
		t.Errorf("%d transfers settled for %d calls, %d of them in %d merged transfers", holds, callers, f.h.in.Load(), f.h.merged.Load())
	}
	as, err := f.c.LookupAccounts(context.Background(), []tb.Uint128{us[0].id})
	if err != nil || len(as) != 1 {
		t.Fatal(as, err)
	}
	if got := as[0].DebitsPending; got != tb.ToUint128(5*callers) {
		t.Errorf("the user's pending debits: %v, want %d", got, 5*callers)
	}
	t.Logf("%d calls, %d transfers, %d merged", callers, holds, f.h.merged.Load())
}

// TestChecks: checks are read, not sent, and answered by the host.
func TestChecks(t *testing.T) {
	f, us := newFixture(t, pipeline.Config{}, 2, 10)
	before := f.c.Stats()
	ds, err := f.p.Checks(context.Background(), []pipeline.Check[*user]{{User: us[0], Amount: 10}, {User: us[1], Amount: 11}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []decision{{admitted: true}, {}}; !slices.Equal(ds, want) {
		t.Errorf("checks answered %+v, want %+v", ds, want)
	}
	if f.h.reads.Load() != 2 {
		t.Errorf("%d users read, want 2", f.h.reads.Load())
	}
	if n := f.c.Stats().CreateTransfers.Requests - before.CreateTransfers.Requests; n != 0 {
		t.Errorf("checks sent %d creates", n)
	}
}

// TestNewAttempt: an attempt whose ID an earlier one spent goes again,
// under the key's marker, every transfer new and carrying the key.
func TestNewAttempt(t *testing.T) {
	f, us := newFixture(t, pipeline.Config{}, 1, 10)
	key := tb.ToUint128(99)
	steps := []pipeline.Step[*user]{{T: hold(f.h.NewID(), us[0], 11), User: us[0], Decide: true}}
	o := f.p.New(pipeline.Spec{Key: key}, steps)
	first := o.Chain[0].ID
	if err := f.p.Submit(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(o.Ds) != 1 || o.Ds[0].admitted {
		t.Fatalf("11 units of 10: %+v", o.Ds)
	}
	// Sent again as it was, the failed ID is spent.
	f.p.NewAttempt(o)
	if !o.Marked || len(o.Chain) != 2 || o.Chain[0].ID != key || o.Chain[1].ID == first || o.Chain[1].UserData128 != key {
		t.Fatalf("a new attempt under a key: marked %v, chain %+v", o.Marked, o.Chain)
	}
	if o.Events[0].I != 1 {
		t.Errorf("the hold's event at %d, want 1 (after the marker)", o.Events[0].I)
	}
	o.Chain[1].Amount = tb.ToUint128(10)
	if err := f.p.Submit(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(o.Ds) != 1 || !o.Ds[0].admitted || o.Ds[0].name != key {
		t.Errorf("the new attempt: %+v, results %+v", o.Ds, o.Res)
	}
}
