package simnet

import (
	"sync"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
)

// fakeClock is a clock that moves only when told to. With auto set, every
// sleep jumps to its end at once (virtual time); otherwise sleepers wait for
// Advance.
type fakeClock struct {
	mu       sync.Mutex
	now      time.Time
	auto     bool
	sleepers []fakeSleeper
}

type fakeSleeper struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(auto bool) *fakeClock {
	return &fakeClock{now: time.Unix(1_700_000_000, 0), auto: auto}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	at := f.now.Add(d)
	if f.auto {
		f.now = at
		ch <- at
		return ch
	}
	f.sleepers = append(f.sleepers, fakeSleeper{at, ch})
	return ch
}

func (f *fakeClock) SleepUntil(t time.Time, stop <-chan struct{}) {
	f.mu.Lock()
	if f.auto || !t.After(f.now) {
		if t.After(f.now) {
			f.now = t
		}
		f.mu.Unlock()
		return
	}
	ch := make(chan time.Time, 1)
	f.sleepers = append(f.sleepers, fakeSleeper{t, ch})
	f.mu.Unlock()
	select {
	case <-ch:
	case <-stop:
	}
}

// Advance moves the clock on by d and wakes the sleepers whose time came.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.sleepers[:0]
	for _, s := range f.sleepers {
		if s.at.After(f.now) {
			kept = append(kept, s)
			continue
		}
		s.ch <- s.at
	}
	f.sleepers = kept
}

func (f *fakeClock) sleeping() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sleepers)
}

// eventually polls cond for up to 5 s: for waiting on other goroutines,
// not for timing.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// recorder is a tb.Client that records the calls that reach it: the
// operation and the number of events, in order.
type recorder struct {
	tb.Client
	mu    sync.Mutex
	calls []string
}

func (r *recorder) log(s string) {
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func (r *recorder) CreateTransfers(ts []tb.Transfer) ([]tb.CreateTransferResult, error) {
	r.log("create:" + itoa(len(ts)))
	return r.Client.CreateTransfers(ts)
}

func (r *recorder) LookupAccounts(ids []tb.Uint128) ([]tb.Account, error) {
	r.log("lookup:" + itoa(len(ids)))
	return r.Client.LookupAccounts(ids)
}

func (r *recorder) GetAccountTransfers(f tb.AccountFilter) ([]tb.Transfer, error) {
	r.log("scan:" + itoa(int(f.Limit)))
	return r.Client.GetAccountTransfers(f)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// ledgerFixture is an engine with an operator and users funded with limit
// units each on ledger 1.
type ledgerFixture struct {
	e     *embedded.Engine
	op    tb.Uint128
	users []tb.Uint128
}

func newLedger(t *testing.T, users int, limit uint64) *ledgerFixture {
	t.Helper()
	e := embedded.New()
	t.Cleanup(e.Close)
	f := &ledgerFixture{e: e, op: tb.ToUint128(1)}
	accounts := []tb.Account{{ID: f.op, Ledger: 1, Code: 1}}
	var credits []tb.Transfer
	for i := range users {
		id := tb.ToUint128(uint64(100 + i))
		f.users = append(f.users, id)
		accounts = append(accounts, tb.Account{ID: id, Ledger: 1, Code: 1,
			Flags: tb.AccountFlags{DebitsMustNotExceedCredits: true}.ToUint16()})
		credits = append(credits, tb.Transfer{ID: tb.ID(), DebitAccountID: f.op, CreditAccountID: id,
			Amount: tb.ToUint128(limit), Ledger: 1, Code: 1})
	}
	if res, err := e.CreateAccounts(accounts); err != nil || !allStatus(res, func(r tb.CreateAccountResult) bool { return r.Status == tb.AccountCreated }) {
		t.Fatalf("create accounts: %v %v", res, err)
	}
	if res, err := e.CreateTransfers(credits); err != nil || !allStatus(res, func(r tb.CreateTransferResult) bool { return r.Status == tb.TransferCreated }) {
		t.Fatalf("credit users: %v %v", res, err)
	}
	return f
}

func allStatus[T any](res []T, ok func(T) bool) bool {
	for _, r := range res {
		if !ok(r) {
			return false
		}
	}
	return true
}

// take returns a pending transfer of one unit from user i.
func (f *ledgerFixture) take(i int) tb.Transfer {
	return tb.Transfer{ID: tb.ID(), DebitAccountID: f.users[i], CreditAccountID: f.op, Amount: tb.ToUint128(1),
		Timeout: 60, Ledger: 1, Code: 1, Flags: tb.TransferFlags{Pending: true}.ToUint16()}
}

// flat is a model where every request costs d.
func flat(d time.Duration) Model { return Model{Name: "flat", RoundTrip: d} }
