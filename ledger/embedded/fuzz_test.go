package embedded_test

import (
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
)

// FuzzCreateTransfers runs a short sequence of create_transfers requests,
// decoded from the input, on the engine and on model, a deliberately simple
// reimplementation of the rules for a small world, and fails on any
// difference in a status, a balance, a stored amount or the change events.
//
// The world: accounts 0-3 on ledger 1 (each with no limit, debits limited
// to credits, or credits limited to debits), account 4 on ledger 2, and
// account 5 that does not exist. Transfers are plain, pending (timeouts of
// 0-3 s), closing, posts and voids of earlier transfers, balancing, retries
// of earlier transfers, in linked chains or not; amounts are small, so no sum
// overflows. Time moves in steps of 333 ms, which never land on an expiry
// instant (a whole number of seconds after a transfer), so the model can
// tell what has expired from the clock alone.
func FuzzCreateTransfers(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput{data: data}
		clock := embedded.NewManualClock(time.Unix(1_700_000_000, 0))
		e := embedded.New(embedded.WithClock(clock))
		defer e.Close()
		m := newModel(in.next())
		if res, err := e.CreateAccounts(m.accounts()); err != nil || len(res) != 5 {
			t.Fatalf("CreateAccounts = %v, %v", res, err)
		}
		var submitted []tb.Transfer
		for step := 0; step < 40 && !in.done(); step++ {
			if op := in.next(); op%4 == 3 {
				units := int(in.next() % 7)
				clock.Advance(time.Duration(units) * 333 * time.Millisecond)
				m.now += units
				continue
			}
			batch := in.batch(m, &submitted)
			res, err := e.CreateTransfers(batch)
			if err != nil {
				t.Fatalf("step %d: CreateTransfers = %v", step, err)
			}
			want := m.apply(batch)
			for i := range batch {
				if res[i].Status != want[i] {
					t.Fatalf("step %d: transfer %d of %d (%+v): status %v, model says %v\nbatch %+v", step, i, len(batch), batch[i], res[i].Status, want[i], batch)
				}
			}
			m.check(t, e, step, batch)
		}
		// Every event's balances follow from the events before it; the last
		// ones are the accounts'.
		events, err := e.GetChangeEvents(tb.ChangeEventsFilter{Limit: 2730})
		if err != nil {
			t.Fatal(err)
		}
		m.expire() // the read is a request too
		end := replayChanges(t, events, nil)
		for i := range 5 {
			if got, want := end[fuzzAccount(i)], m.accts[i].bal; got != want {
				t.Fatalf("after the change events account %d has %v, model %v", i, got, want)
			}
		}
		if expired := m.count(stateExpiredM); len(events) != len(m.xfers)+expired {
			t.Fatalf("%d change events, want %d transfers and %d expiries", len(events), len(m.xfers), expired)
		}
	})
}

func fuzzAccount(i int) tb.Uint128 { return tb.ToUint128(uint64(1000 + i)) }

// fuzzInput hands out the input's bytes, zeros once they run out.
type fuzzInput struct {
	data []byte
	pos  int
}

func (in *fuzzInput) done() bool { return in.pos >= len(in.data) }

func (in *fuzzInput) next() byte {
	if in.done() {
		return 0
	}
	in.pos++
	return in.data[in.pos-1]
}

// batch decodes a request of 1-4 transfers, 5 bytes each: kind, accounts,
// amount, a selector (timeout, pending transfer, balancing flags or
// transfer to retry) and the linked flag.
func (in *fuzzInput) batch(m *model, submitted *[]tb.Transfer) []tb.Transfer {
	const (
		plain = iota
		pending
		post
		void
		balancing
		balancingPending
		retry
		closing
		misfit // a timeout or a closing flag on a transfer that is not pending
	)
	kinds := [16]int{plain, plain, plain, pending, pending, pending, closing, post, post, void, void,
		balancing, balancingPending, retry, retry, misfit}
	debits := [8]int{0, 1, 2, 3, 0, 1, 4, 5}  // mostly accounts of ledger 1
	offsets := [8]int{1, 2, 3, 1, 2, 3, 5, 0} // from the debit account to the credit account
	n := 1 + int(in.next()%4)
	batch := make([]tb.Transfer, n)
	for i := range batch {
		kind, accts, amt, sel, link := kinds[in.next()%16], in.next(), in.next(), in.next(), in.next()
		m.nextID++
		dr := debits[accts%8]
		x := tb.Transfer{ID: tb.ToUint128(m.nextID), DebitAccountID: fuzzAccount(dr),
			CreditAccountID: fuzzAccount((dr + offsets[accts/8%8]) % 6), Amount: tb.ToUint128(uint64(amt % 16)), Ledger: 1, Code: 1}
		if amt >= 240 && kind >= post && kind <= balancingPending {
			x.Amount = tb.AmountMax
		}
		// pick returns an earlier transfer: any, or a pending one created.
		pick := func(pendingOnly bool) (tb.Transfer, bool) {
			var from []tb.Transfer
			for _, x := range *submitted {
				if !pendingOnly || x.Flags&fPending != 0 && m.xfers[x.ID] != nil {
					from = append(from, x)
				}
			}
			if len(from) == 0 || sel == 255 {
				return tb.Transfer{}, false
			}
			return from[len(from)-1-int(sel/2)%len(from)], true
		}
		switch kind {
		case pending:
			x.Flags, x.Timeout = fPending, uint32(sel%4)
		case post, void:
			p, ok := pick(sel%2 == 0)
			if !ok {
				p.ID = tb.ToUint128(1 << 40) // no such transfer
			}
			x = tb.Transfer{ID: x.ID, PendingID: p.ID, Amount: x.Amount, Flags: fPost}
			if kind == void {
				x.Flags = fVoid
			}
			if amt%16 == 15 { // the pending amount exactly, or one more or less
				x.Amount = tb.ToUint128(lo(p.Amount) + uint64(sel%3) - 1)
			}
		case balancing, balancingPending:
			x.Flags = []uint16{fBalancingDr, fBalancingCr, fBalancingDr | fBalancingCr}[sel%3]
			if kind == balancingPending {
				x.Flags |= fPending
			}
		case retry:
			if p, ok := pick(false); ok {
				x = p
				x.Flags &^= fLinked
			}
		case closing:
			x.Flags = fPending | []uint16{fClosingDr, fClosingCr, fClosingDr | fClosingCr}[sel%3]
			x.Timeout = uint32(sel / 4 % 3)
		case misfit:
			x.Timeout = 1
			if sel%2 == 1 {
				x.Timeout, x.Flags = 0, fClosingDr
			}
		}
		// Linked, a quarter of the time; rarely at the end of a batch.
		if i < n-1 && link%4 == 1 || i == n-1 && link == 253 {
			x.Flags |= fLinked
		}
		batch[i] = x
		*submitted = append(*submitted, x)
	}
	return batch
}

// The model.

const (
	statePendingM = iota
	statePostedM
	stateVoidedM
	stateExpiredM
)

type modelAcct struct {
	flags  uint16
	ledger uint32
	closed bool
	bal    bal
}

type modelXfer struct {
	t         tb.Transfer // as submitted
	dr, cr    int
	amount    uint64 // moved
	pending   bool
	state     int // of a pending transfer
	createdAt int // clock units of 333 ms
}

type model struct {
	accts  [5]modelAcct
	xfers  map[tb.Uint128]*modelXfer
	failed map[tb.Uint128]bool // IDs used up by a transient failure
	now    int                 // clock units of 333 ms
	nextID uint64
}

func newModel(flags byte) *model {
	m := &model{xfers: map[tb.Uint128]*modelXfer{}, failed: map[tb.Uint128]bool{}}
	for i := range 4 {
		m.accts[i] = modelAcct{flags: []uint16{0, aDebitsLimited, aCreditLimited, 0}[flags>>(2*i)&3], ledger: 1}
	}
	m.accts[4] = modelAcct{ledger: 2}
	return m
}

func (m *model) accounts() []tb.Account {
	var out []tb.Account
	for i, a := range m.accts {
		out = append(out, tb.Account{ID: fuzzAccount(i), Ledger: a.ledger, Code: 1, Flags: a.flags})
	}
	return out
}

func (m *model) index(id tb.Uint128) int {
	for i := range 6 {
		if fuzzAccount(i) == id {
			return i
		}
	}
	return -1
}

// expire releases the pending transfers whose timeout has passed: a step of
// 333 ms never ends on a whole second after another step.
func (m *model) expire() {
	for _, x := range m.xfers {
		if x.pending && x.state == statePendingM && x.t.Timeout > 0 && m.now*333 > x.createdAt*333+int(x.t.Timeout)*1000 {
			x.state = stateExpiredM
			m.release(x)
		}
	}
}

// release takes back the amounts of pending transfer p, voided or expired,
// and reopens the accounts it closed.
func (m *model) release(p *modelXfer) {
	d, c := &m.accts[p.dr], &m.accts[p.cr]
	d.bal.dPend -= p.amount
	c.bal.cPend -= p.amount
	if p.t.Flags&fClosingDr != 0 {
		d.closed = false
	}
	if p.t.Flags&fClosingCr != 0 {
		c.closed = false
	}
}

// apply executes a request and returns the statuses it should get.
func (m *model) apply(batch []tb.Transfer) []tb.CreateTransferStatus {
	m.expire()
	out := make([]tb.CreateTransferStatus, len(batch))
	chain := -1
	var saved *model
	for i, x := range batch {
		linked := x.Flags&fLinked != 0
		if linked && chain < 0 {
			chain, saved = i, m.save()
		}
		switch {
		case linked && i == len(batch)-1:
			out[i] = tb.TransferLinkedEventChainOpen
		case chain >= 0 && saved == nil:
			out[i] = tb.TransferLinkedEventFailed
		default:
			out[i] = m.create(x)
		}
		if out[i] != tb.TransferCreated {
			if chain >= 0 && saved != nil {
				m.restore(saved)
				saved = nil
				for j := chain; j < i; j++ {
					out[j] = tb.TransferLinkedEventFailed
				}
			}
			switch out[i] {
			case tb.TransferDebitAccountNotFound, tb.TransferCreditAccountNotFound, tb.TransferPendingTransferNotFound,
				tb.TransferExceedsCredits, tb.TransferExceedsDebits,
				tb.TransferDebitAccountAlreadyClosed, tb.TransferCreditAccountAlreadyClosed:
				m.failed[x.ID] = true
			}
		}
		if chain >= 0 && (!linked || i == len(batch)-1) {
			chain, saved = -1, nil
		}
	}
	return out
}

// save copies the state a failed chain returns to (failed IDs excepted).
func (m *model) save() *model {
	c := *m
	c.xfers = map[tb.Uint128]*modelXfer{}
	for id, x := range m.xfers {
		cx := *x
		c.xfers[id] = &cx
	}
	return &c
}

func (m *model) restore(c *model) { m.accts, m.xfers = c.accts, c.xfers }

// create validates and applies one transfer.
func (m *model) create(x tb.Transfer) tb.CreateTransferStatus {
	if e, ok := m.xfers[x.ID]; ok {
		if e.t.Flags != x.Flags {
			return tb.TransferExistsWithDifferentFlags
		}
		return tb.TransferExists // a retry is the same transfer but for its linked flag
	}
	if m.failed[x.ID] {
		return tb.TransferIDAlreadyFailed
	}
	if x.Flags&(fPost|fVoid) != 0 {
		return m.postOrVoid(x)
	}
	dr, cr := m.index(x.DebitAccountID), m.index(x.CreditAccountID)
	pending := x.Flags&fPending != 0
	switch {
	case dr == cr:
		return tb.TransferAccountsMustBeDifferent
	case !pending && x.Timeout != 0:
		return tb.TransferTimeoutReservedForPendingTransfer
	case !pending && x.Flags&(fClosingDr|fClosingCr) != 0:
		return tb.TransferClosingTransferMustBePending
	case dr == 5:
		return tb.TransferDebitAccountNotFound
	case cr == 5:
		return tb.TransferCreditAccountNotFound
	case m.accts[dr].ledger != m.accts[cr].ledger:
		return tb.TransferAccountsMustHaveTheSameLedger
	case m.accts[dr].ledger != x.Ledger:
		return tb.TransferTransferMustHaveTheSameLedgerAsAccounts
	case m.accts[dr].closed:
		return tb.TransferDebitAccountAlreadyClosed
	case m.accts[cr].closed:
		return tb.TransferCreditAccountAlreadyClosed
	}
	d, c := &m.accts[dr], &m.accts[cr]
	amount := lo(x.Amount) // AmountMax reads as 2^64-1: more than any balance here
	if x.Flags&fBalancingDr != 0 {
		amount = min(amount, room(d.bal.cPost, d.bal.dPost+d.bal.dPend))
	}
	if x.Flags&fBalancingCr != 0 {
		amount = min(amount, room(c.bal.dPost, c.bal.cPost+c.bal.cPend))
	}
	if amount > 1<<32 {
		panic("the fuzz world keeps amounts small")
	}
	if d.flags&aDebitsLimited != 0 && d.bal.dPend+d.bal.dPost+amount > d.bal.cPost {
		return tb.TransferExceedsCredits
	}
	if c.flags&aCreditLimited != 0 && c.bal.cPend+c.bal.cPost+amount > c.bal.dPost {
		return tb.TransferExceedsDebits
	}
	if pending {
		d.bal.dPend += amount
		c.bal.cPend += amount
		d.closed = d.closed || x.Flags&fClosingDr != 0
		c.closed = c.closed || x.Flags&fClosingCr != 0
	} else {
		d.bal.dPost += amount
		c.bal.cPost += amount
	}
	m.xfers[x.ID] = &modelXfer{t: x, dr: dr, cr: cr, amount: amount, pending: pending, createdAt: m.now}
	return tb.TransferCreated
}

// room returns limit-used, or 0 if used is more.
func room(limit, used uint64) uint64 {
	if used > limit {
		return 0
	}
	return limit - used
}

func (m *model) postOrVoid(x tb.Transfer) tb.CreateTransferStatus {
	p, ok := m.xfers[x.PendingID]
	if !ok {
		return tb.TransferPendingTransferNotFound
	}
	if !p.pending {
		return tb.TransferPendingTransferNotPending
	}
	post := x.Flags&fPost != 0
	amount := lo(x.Amount)
	if post && x.Amount == tb.AmountMax || !post && amount == 0 {
		amount = p.amount
	}
	switch {
	case amount > p.amount:
		return tb.TransferExceedsPendingTransferAmount
	case !post && amount < p.amount:
		return tb.TransferPendingTransferHasDifferentAmount
	case p.state == statePostedM:
		return tb.TransferPendingTransferAlreadyPosted
	case p.state == stateVoidedM:
		return tb.TransferPendingTransferAlreadyVoided
	case p.state == stateExpiredM:
		return tb.TransferPendingTransferExpired
	case post && m.accts[p.dr].closed: // only a void moves a closed account
		return tb.TransferDebitAccountAlreadyClosed
	case post && m.accts[p.cr].closed:
		return tb.TransferCreditAccountAlreadyClosed
	}
	d, c := &m.accts[p.dr], &m.accts[p.cr]
	m.release(p)
	p.state = stateVoidedM
	if post {
		p.state = statePostedM
		d.bal.dPost += amount
		c.bal.cPost += amount
	}
	m.xfers[x.ID] = &modelXfer{t: x, dr: p.dr, cr: p.cr, amount: amount, createdAt: m.now}
	return tb.TransferCreated
}

func (m *model) count(state int) int {
	n := 0
	for _, x := range m.xfers {
		if x.pending && x.state == state {
			n++
		}
	}
	return n
}

// check compares the accounts' balances and the batch's stored transfers.
func (m *model) check(t *testing.T, e *embedded.Engine, step int, batch []tb.Transfer) {
	t.Helper()
	ids := make([]tb.Uint128, 5)
	for i := range ids {
		ids[i] = fuzzAccount(i)
	}
	accts, err := e.LookupAccounts(ids)
	if err != nil || len(accts) != 5 {
		t.Fatalf("step %d: LookupAccounts = %v, %v", step, accts, err)
	}
	m.expire() // the lookup is a request too
	for i, a := range accts {
		if got := balOf(a); got != m.accts[i].bal || a.AccountFlags().Closed != m.accts[i].closed {
			t.Fatalf("step %d: account %d: %v closed %v, model %v closed %v", step, i, got, a.AccountFlags().Closed, m.accts[i].bal, m.accts[i].closed)
		}
	}
	found, err := e.LookupTransfers(transferIDs(batch))
	if err != nil {
		t.Fatal(err)
	}
	stored := map[tb.Uint128]tb.Transfer{}
	for _, x := range found {
		stored[x.ID] = x
	}
	for _, x := range batch {
		mx, ok := m.xfers[x.ID]
		got, found := stored[x.ID]
		if ok != found || ok && lo(got.Amount) != mx.amount {
			t.Fatalf("step %d: transfer %v stored %v (%+v), model %v (%+v)", step, x.ID, found, got, ok, mx)
		}
	}
}

func transferIDs(batch []tb.Transfer) []tb.Uint128 {
	out := make([]tb.Uint128, len(batch))
	for i, x := range batch {
		out[i] = x.ID
	}
	return out
}
