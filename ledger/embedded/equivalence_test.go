//go:build unix

package embedded_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
)

// TestFileAnswersAsEngine holds a data file's answers against the in-memory
// engine's over a long random sequence of operations (every operation of
// tb.Client, with pending transfers posted, voided and expired, retries
// with and without a changed field, linked chains, failed IDs reused,
// balancing and closing transfers), both on one manual clock, the file
// closed and opened again now and then: every result, timestamps included,
// must be the same. An operation is one event of a create request or one
// read.
func TestFileAnswersAsEngine(t *testing.T) {
	ops := 100_000
	if testing.Short() || raceEnabled {
		ops = 10_000
	}
	path := filepath.Join(t.TempDir(), "data")
	clock := embedded.NewManualClock(time.Unix(1_700_000_000, 0))
	w := &equivWorkload{
		t:        t,
		rng:      rand.New(rand.NewPCG(7, 11)),
		clock:    clock,
		mem:      embedded.New(embedded.WithClock(clock)),
		path:     path,
		statuses: map[tb.CreateTransferStatus]int{},
	}
	t.Cleanup(w.mem.Close)
	w.reopen()
	t.Cleanup(func() { w.file.Close() })
	w.provision()
	for w.ops < ops {
		w.step()
	}
	t.Logf("%d operations in %d steps, %d reopens; transfer results: %v", w.ops, w.steps, w.reopens, w.statuses)
	stats := w.mem.Stats()
	// The workload must reach what it is meant to test.
	for _, st := range []tb.CreateTransferStatus{tb.TransferCreated, tb.TransferExists, tb.TransferIDAlreadyFailed,
		tb.TransferPendingTransferAlreadyPosted, tb.TransferPendingTransferAlreadyVoided, tb.TransferPendingTransferExpired,
		tb.TransferExistsWithDifferentAmount, tb.TransferLinkedEventFailed} {
		if w.statuses[st] == 0 {
			t.Errorf("no transfer answered %v: the workload does not test it", st)
		}
	}
	if stats.Expired == 0 || stats.Pending == 0 {
		t.Errorf("Stats() = %+v: no pending transfer expired, or none is pending", stats)
	}
}

// equivWorkload drives both engines with the same random requests.
type equivWorkload struct {
	t     *testing.T
	rng   *rand.Rand
	clock *embedded.ManualClock
	mem   *embedded.Engine
	file  *embedded.File
	path  string

	accounts []tb.Account  // every account created
	sent     []tb.Transfer // every transfer event sent
	pending  []tb.Transfer // pending transfers sent (some failed)
	next     uint64
	ops      int
	steps    int
	reopens  int
	statuses map[tb.CreateTransferStatus]int // the engine's results
}

func (w *equivWorkload) id() tb.Uint128 {
	w.next++
	// Spread the IDs over both halves, as hashed IDs are.
	return tb.BytesToUint128([16]byte{byte(w.next), byte(w.next >> 8), byte(w.next >> 16), 0, 0, 0, 0, 3, byte(w.next * 7), 0, 0, 0, 0, 0, 0, 1})
}

func (w *equivWorkload) reopen() {
	w.t.Helper()
	if w.file != nil {
		w.file.Close()
		w.reopens++
	}
	f, err := embedded.Open(w.path, embedded.WithClock(w.clock))
	if err != nil {
		w.t.Fatalf("step %d: Open(%s) = %v", w.steps, w.path, err)
	}
	w.file = f
}

// same fails the test unless both engines answered alike.
func same[R any](w *equivWorkload, what string, mem, file R, memErr, fileErr error) {
	w.t.Helper()
	if !reflect.DeepEqual(mem, file) || fmt.Sprint(memErr) != fmt.Sprint(fileErr) {
		w.t.Fatalf("step %d (operation %d): %s:\nengine: %+v (err %v)\nfile:   %+v (err %v)", w.steps, w.ops, what, mem, memErr, file, fileErr)
	}
}

// provision creates an operator and accounts of every kind on two ledgers,
// and funds them.
func (w *equivWorkload) provision() {
	flags := []tb.AccountFlags{
		{}, {History: true},
		{DebitsMustNotExceedCredits: true}, {DebitsMustNotExceedCredits: true, History: true},
		{CreditsMustNotExceedDebits: true},
	}
	var batch []tb.Account
	for ledger := uint32(7); ledger <= 8; ledger++ {
		for i := range 24 {
			batch = append(batch, tb.Account{ID: w.id(), Ledger: ledger, Code: 1, Flags: flags[i%len(flags)].ToUint16()})
		}
	}
	w.createAccounts(batch)
	var funding []tb.Transfer
	for _, a := range w.accounts {
		if a.Flags&aDebitsLimited != 0 {
			op := w.accounts[0]
			if a.Ledger != op.Ledger {
				op = w.accounts[24]
			}
			funding = append(funding, tb.Transfer{ID: w.id(), DebitAccountID: op.ID, CreditAccountID: a.ID, Amount: tb.ToUint128(200), Ledger: a.Ledger, Code: 1})
		}
	}
	w.createTransfers(funding)
}

func (w *equivWorkload) createAccounts(batch []tb.Account) {
	w.t.Helper()
	r1, e1 := w.mem.CreateAccounts(batch)
	r2, e2 := w.file.CreateAccounts(batch)
	same(w, "CreateAccounts", r1, r2, e1, e2)
	w.ops += len(batch)
	for i, r := range r1 {
		if r.Status == tb.AccountCreated {
			w.accounts = append(w.accounts, batch[i])
		}
	}
}

func (w *equivWorkload) createTransfers(batch []tb.Transfer) {
	w.t.Helper()
	w.sent = append(w.sent, batch...)
	r1, e1 := w.mem.CreateTransfers(batch)
	r2, e2 := w.file.CreateTransfers(batch)
	same(w, "CreateTransfers", r1, r2, e1, e2)
	w.ops += len(batch)
	for i, r := range r1 {
		w.statuses[r.Status]++
		if r.Status == tb.TransferCreated && batch[i].Flags&fPending != 0 {
			w.pending = append(w.pending, batch[i])
		}
	}
}

// step sends one random request, or lets time pass, or reopens the file.
// The clock moves on at every step, as a real one does: a read takes a
// timestamp, which a file does not record, so with a clock standing still
// a request after a reopen would be stamped before the reads that
// preceded it.
func (w *equivWorkload) step() {
	w.steps++
	w.clock.Advance(time.Millisecond)
	switch k := w.rng.IntN(100); {
	case k < 40:
		batch := make([]tb.Transfer, 1+w.rng.IntN(12))
		for i := range batch {
			batch[i] = w.transfer()
		}
		w.createTransfers(batch)
	case k < 44:
		w.createAccounts(w.newAccounts())
	case k < 56:
		w.clock.Advance(time.Duration(w.rng.IntN(2500)) * time.Millisecond)
	case k < 99:
		w.read()
	default:
		w.reopen()
	}
}

func (w *equivWorkload) account() tb.Account { return w.accounts[w.rng.IntN(len(w.accounts))] }

// peer returns an account on a's ledger but a, mostly, else any account.
func (w *equivWorkload) peer(a tb.Account) tb.Account {
	for range 8 {
		if b := w.account(); b.Ledger == a.Ledger && b.ID != a.ID || w.rng.IntN(20) == 0 {
			return b
		}
	}
	return w.account()
}

func (w *equivWorkload) transferID() tb.Uint128 {
	switch {
	case len(w.sent) == 0 || w.rng.IntN(10) == 0:
		return w.id() // unknown
	default:
		return w.sent[w.rng.IntN(len(w.sent))].ID
	}
}

// newAccounts returns new accounts, now and then one already sent (the
// same or with a field changed) or an invalid one.
func (w *equivWorkload) newAccounts() []tb.Account {
	batch := make([]tb.Account, 1+w.rng.IntN(4))
	for i := range batch {
		a := tb.Account{ID: w.id(), Ledger: 7 + uint32(w.rng.IntN(2)), Code: 1}
		switch w.rng.IntN(10) {
		case 0:
			a = w.account()
			a.Timestamp = 0
			if w.rng.IntN(2) == 0 {
				a.UserData64++
			}
		case 1:
			a.Code = 0
		case 2:
			a.Flags = tb.AccountFlags{Linked: true}.ToUint16()
		case 3:
			a.Flags = tb.AccountFlags{History: true}.ToUint16()
		}
		batch[i] = a
	}
	return batch
}

// transfer returns one random transfer event.
func (w *equivWorkload) transfer() tb.Transfer {
	dr := w.account()
	cr := w.peer(dr)
	x := tb.Transfer{ID: w.id(), DebitAccountID: dr.ID, CreditAccountID: cr.ID,
		Amount: tb.ToUint128(uint64(1 + w.rng.IntN(40))), Ledger: dr.Ledger, Code: 1}
	switch k := w.rng.IntN(100); {
	case k < 38:
		x.Flags = tb.TransferFlags{Pending: true}.ToUint16()
		x.Timeout = uint32(w.rng.IntN(5))
		if w.rng.IntN(40) == 0 {
			x.Flags |= tb.TransferFlags{ClosingDebit: true}.ToUint16()
		}
	case k < 55:
		// Plain.
	case k < 60:
		x.Flags = tb.TransferFlags{BalancingDebit: true}.ToUint16()
		if w.rng.IntN(2) == 0 {
			x.Flags = tb.TransferFlags{BalancingCredit: true, Pending: true}.ToUint16()
		}
	case k < 80 && len(w.pending) > 0:
		p := w.pending[w.rng.IntN(len(w.pending))]
		x = tb.Transfer{ID: w.id(), PendingID: p.ID, Flags: tb.TransferFlags{PostPendingTransfer: true}.ToUint16()}
		if w.rng.IntN(2) == 0 {
			x.Flags = tb.TransferFlags{VoidPendingTransfer: true}.ToUint16()
		}
		switch w.rng.IntN(5) {
		case 0:
			x.Amount = p.Amount
		case 1:
			x.Amount = tb.ToUint128(1)
		case 2:
			x.Amount = tb.AmountMax
		case 3:
			x.UserData64 = 9
		}
	case k < 95 && len(w.sent) > 0:
		x = w.sent[w.rng.IntN(len(w.sent))]
		switch w.rng.IntN(4) {
		case 0:
			x.Amount = tb.ToUint128(999)
		case 1:
			x.UserData32++
		}
	default:
		x.DebitAccountID = w.id() // no such account: the ID is used up
	}
	if w.rng.IntN(12) == 0 {
		x.Flags |= tb.TransferFlags{Linked: true}.ToUint16()
	}
	return x
}

// read sends one random read to both engines.
func (w *equivWorkload) read() {
	w.t.Helper()
	w.ops++
	switch w.rng.IntN(7) {
	case 0:
		ids := make([]tb.Uint128, 1+w.rng.IntN(8))
		for i := range ids {
			ids[i] = w.transferID()
		}
		r1, e1 := w.mem.LookupTransfers(ids)
		r2, e2 := w.file.LookupTransfers(ids)
		same(w, "LookupTransfers", r1, r2, e1, e2)
	case 1:
		ids := make([]tb.Uint128, 1+w.rng.IntN(8))
		for i := range ids {
			ids[i] = w.account().ID
		}
		r1, e1 := w.mem.LookupAccounts(ids)
		r2, e2 := w.file.LookupAccounts(ids)
		same(w, "LookupAccounts", r1, r2, e1, e2)
	case 2, 3:
		f := tb.AccountFilter{AccountID: w.account().ID, Limit: uint32(1 + w.rng.IntN(30)),
			Flags: uint32(1 + w.rng.IntN(7))}
		if w.rng.IntN(3) == 0 && len(w.sent) > 0 {
			f.TimestampMin = uint64(w.clock.Now().Add(-time.Duration(w.rng.IntN(60)) * time.Second).UnixNano())
		}
		r1, e1 := w.mem.GetAccountTransfers(f)
		r2, e2 := w.file.GetAccountTransfers(f)
		same(w, fmt.Sprintf("GetAccountTransfers(%+v)", f), r1, r2, e1, e2)
		b1, e1 := w.mem.GetAccountBalances(f)
		b2, e2 := w.file.GetAccountBalances(f)
		same(w, fmt.Sprintf("GetAccountBalances(%+v)", f), b1, b2, e1, e2)
	case 4:
		f := tb.QueryFilter{Ledger: 7 + uint32(w.rng.IntN(2)), Limit: uint32(1 + w.rng.IntN(50))}
		if w.rng.IntN(2) == 0 {
			f.Flags = tb.QueryFilterFlags{Reversed: true}.ToUint32()
		}
		r1, e1 := w.mem.QueryTransfers(f)
		r2, e2 := w.file.QueryTransfers(f)
		same(w, fmt.Sprintf("QueryTransfers(%+v)", f), r1, r2, e1, e2)
		a1, e1 := w.mem.QueryAccounts(f)
		a2, e2 := w.file.QueryAccounts(f)
		same(w, fmt.Sprintf("QueryAccounts(%+v)", f), a1, a2, e1, e2)
	default:
		f := tb.ChangeEventsFilter{Limit: uint32(1 + w.rng.IntN(60))}
		if w.rng.IntN(2) == 0 {
			f.TimestampMin = uint64(w.clock.Now().Add(-time.Duration(w.rng.IntN(30)) * time.Second).UnixNano())
		}
		r1, e1 := w.mem.GetChangeEvents(f)
		r2, e2 := w.file.GetChangeEvents(f)
		same(w, fmt.Sprintf("GetChangeEvents(%+v)", f), r1, r2, e1, e2)
	}
}
