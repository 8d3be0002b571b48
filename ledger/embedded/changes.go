package embedded

import (
	"sort"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Change events, as get_change_events reports them.
//
// TigerBeetle 0.17.9 records an event for every transfer it creates and for
// every pending transfer that expires, each with a timestamp of its own and
// a snapshot of both accounts' balances and flags right after it
// (StateMachine.account_event in src/state_machine.zig). Account creations
// are not events, nor are failed or rolled-back transfers.
//
// Storing two balance snapshots with every transfer would more than double
// the engine's memory, so it stores what it needs to recompute them: the
// expiries in a log of their own (a transfer's record already holds the
// rest), each account's expiries beside its debits and credits, and every
// ckptEvery-th snapshot of each account. The snapshot after any event is
// then the nearest earlier checkpoint plus at most ckptEvery-1 events.
//
// An expiry event's timestamp: a cluster expires pending transfers in
// operations of their own (pulses) shortly after they are due, in the order
// of their expiry instant and then of their own timestamp, each stamped
// after every timestamp issued before. The engine releases a pending
// transfer at the first request at or after its instant and stamps it with
// its instant, or one past the previous timestamp given to an event if that
// is later. That depends only on the create requests and their times, not on
// when reads happened to release it, so a journal replays the same stamps.
// A create request's own events are stamped after the expiries it released.

// changeEventsMax is the most change events one request may ask for: as
// many 384-byte ChangeEvents as fit a 1 MiB message body.
const changeEventsMax = 2730

// expiredEvent is the expiry of a pending transfer.
type expiredEvent struct {
	ts    uint64 // the event's timestamp
	xfer  uint32 // arena index of the pending transfer
	after uint32 // transfers stored before it: it precedes transfer i iff after <= i
}

// ckptEvery is how many change events of an account separate two of its
// checkpoints: a checkpoint costs 80 bytes, 2.5 bytes per event.
const ckptEvery = 32

// ckpt is an account's balances and flags right after one of its events.
type ckpt struct {
	d, c, x uint32 // the account's debits, credits and expiries up to the event
	flags   uint16
	balances
}

func (a *acct) events() int { return a.debits.len() + a.credits.len() + a.expired.len() }

// noteEvent takes a checkpoint of a, whose lists, balances and flags
// include an event that just happened, if it is due one.
func (a *acct) noteEvent() {
	if a.events()%ckptEvery == 0 {
		a.ckpts.push(ckpt{
			d:        uint32(a.debits.len()),
			c:        uint32(a.credits.len()),
			x:        uint32(a.expired.len()),
			flags:    a.flags,
			balances: a.balances,
		})
	}
}

// dropCkpts removes the checkpoints of events rolled back.
func (a *acct) dropCkpts() {
	n := a.events()
	// Only those in memory can be rolled back: those in a store are older
	// than the request.
	for k := a.ckpts.len() - 1; k >= int(a.ckpts.base); k-- {
		if c := a.ckpts.at(k); int(c.d+c.c+c.x) <= n {
			break
		}
		a.ckpts.truncate(k)
	}
}

// expireOne applies the expiry of pending transfer idx, already marked
// expired, and records it as a change event.
func (s *state) expireOne(idx uint32) {
	p := s.transfers.at(idx)
	dr, cr := s.accounts.at(p.dr), s.accounts.at(p.cr)
	dr.dPend, _ = dr.dPend.Sub(p.amount)
	cr.cPend, _ = cr.cPend.Sub(p.amount)
	if p.flags&tfClosingDr != 0 {
		dr.flags &^= afClosed
	}
	if p.flags&tfClosingCr != 0 {
		cr.flags &^= afClosed
	}
	s.pendingCount--
	s.expiredCount++

	// Requests leave room for the timestamps of the expiries they release
	// (Engine.begin), so ts stays a valid timestamp.
	ts := max(p.expiresAt(), s.lastEvent+1)
	s.lastEvent = ts
	e, ev := s.expired.push()
	*ev = expiredEvent{ts: ts, xfer: idx, after: s.transfers.n}
	dr.expired.push(e)
	dr.noteEvent()
	cr.expired.push(e)
	cr.noteEvent()
	if s.st != nil {
		s.st.touchAccount(p.dr)
		s.st.touchAccount(p.cr)
	}
}

// changeEvents returns the change events that match f, in timestamp order,
// or none if f is invalid.
func (s *state) changeEvents(f *tb.ChangeEventsFilter) []tb.ChangeEvent {
	if f.Limit == 0 || f.Reserved != [len(f.Reserved)]uint8{} {
		return make([]tb.ChangeEvent, 0)
	}
	lo, hi, ok := timestampRange(f.TimestampMin, f.TimestampMax)
	if !ok {
		return make([]tb.ChangeEvent, 0)
	}
	i := uint32(sort.Search(int(s.transfers.n), func(k int) bool { return s.transfers.at(uint32(k)).ts >= lo }))
	j := uint32(sort.Search(int(s.expired.n), func(k int) bool { return s.expired.at(uint32(k)).ts >= lo }))
	out := make([]tb.ChangeEvent, 0, min(int(f.Limit), 64))
	for len(out) < int(f.Limit) {
		xfer := i < s.transfers.n && s.transfers.at(i).ts <= hi
		expiry := j < s.expired.n && s.expired.at(j).ts <= hi
		// Equal timestamps are possible only for an imported transfer
		// stamped like an earlier expiry: the expiry happened first.
		switch {
		case expiry && (!xfer || s.expired.at(j).ts <= s.transfers.at(i).ts):
			out = append(out, s.expiryChange(j))
			j++
		case xfer:
			out = append(out, s.transferChange(i))
			i++
		default:
			return out
		}
	}
	return out
}

// transferChange is the change event of stored transfer i.
func (s *state) transferChange(i uint32) tb.ChangeEvent {
	x := s.transfers.at(i)
	ev := s.changeOf(i)
	switch f := x.flags; {
	case f&tfPending != 0:
		ev.Type = tb.ChangeEventTwoPhasePending
	case f&tfPost != 0:
		ev.Type = tb.ChangeEventTwoPhasePosted
	case f&tfVoid != 0:
		ev.Type = tb.ChangeEventTwoPhaseVoided
	default:
		ev.Type = tb.ChangeEventSinglePhase
	}
	ev.Timestamp = x.ts
	// The accounts' events up to and including transfer i.
	s.putChangeAccounts(&ev, x.dr, x.cr, func(a *acct) (d, c, e int) {
		return countUpTo(&a.debits, i), countUpTo(&a.credits, i),
			sort.Search(a.expired.len(), func(k int) bool { return s.expired.at(a.expired.at(k)).after > i })
	})
	return ev
}

// expiryChange is the change event of expiry j.
func (s *state) expiryChange(j uint32) tb.ChangeEvent {
	e := s.expired.at(j)
	p := s.transfers.at(e.xfer)
	ev := s.changeOf(e.xfer)
	ev.Type = tb.ChangeEventTwoPhaseExpired
	ev.Timestamp = e.ts
	// The accounts' events up to and including expiry j: the transfers
	// stored before it, the expiries up to it.
	s.putChangeAccounts(&ev, p.dr, p.cr, func(a *acct) (d, c, x int) {
		if e.after == 0 {
			return 0, 0, countUpTo(&a.expired, j)
		}
		return countUpTo(&a.debits, e.after-1), countUpTo(&a.credits, e.after-1), countUpTo(&a.expired, j)
	})
	return ev
}

// changeOf returns a change event with the fields of transfer i.
func (s *state) changeOf(i uint32) tb.ChangeEvent {
	t := s.transfer(i)
	return tb.ChangeEvent{
		TransferID:          t.ID,
		TransferAmount:      t.Amount,
		TransferPendingID:   t.PendingID,
		TransferUserData128: t.UserData128,
		TransferUserData64:  t.UserData64,
		TransferUserData32:  t.UserData32,
		TransferTimeout:     t.Timeout,
		TransferCode:        t.Code,
		TransferFlags:       t.Flags,
		Ledger:              t.Ledger,
		TransferTimestamp:   t.Timestamp,
	}
}

// putChangeAccounts fills the account fields of ev with accounts dr and cr
// as they were right after the event; upTo tells how many of an account's
// debits, credits and expiries that is.
func (s *state) putChangeAccounts(ev *tb.ChangeEvent, dr, cr uint32, upTo func(a *acct) (d, c, x int)) {
	s.loadLists(dr)
	s.loadLists(cr)
	a := s.accounts.at(dr)
	d, c, x := upTo(a)
	b, flags := s.balanceAfter(dr, d, c, x)
	ev.DebitAccountID = a.id
	b.dPend.Put(&ev.DebitAccountDebitsPending)
	b.dPost.Put(&ev.DebitAccountDebitsPosted)
	b.cPend.Put(&ev.DebitAccountCreditsPending)
	b.cPost.Put(&ev.DebitAccountCreditsPosted)
	ev.DebitAccountUserData128 = a.ud128
	ev.DebitAccountUserData64 = a.ud64
	ev.DebitAccountUserData32 = a.ud32
	ev.DebitAccountCode = a.code
	ev.DebitAccountFlags = flags
	ev.DebitAccountTimestamp = a.ts

	a = s.accounts.at(cr)
	d, c, x = upTo(a)
	b, flags = s.balanceAfter(cr, d, c, x)
	ev.CreditAccountID = a.id
	b.dPend.Put(&ev.CreditAccountDebitsPending)
	b.dPost.Put(&ev.CreditAccountDebitsPosted)
	b.cPend.Put(&ev.CreditAccountCreditsPending)
	b.cPost.Put(&ev.CreditAccountCreditsPosted)
	ev.CreditAccountUserData128 = a.ud128
	ev.CreditAccountUserData64 = a.ud64
	ev.CreditAccountUserData32 = a.ud32
	ev.CreditAccountCode = a.code
	ev.CreditAccountFlags = flags
	ev.CreditAccountTimestamp = a.ts
}

// countUpTo returns how many entries of an ascending list are at most v.
func countUpTo(l *idxList, v uint32) int {
	return sort.Search(l.len(), func(k int) bool { return l.at(k) > v })
}

// balanceAfter returns the balances and flags of account ai right after
// its first d debits, c credits and x expiries, replayed from the nearest
// checkpoint in the order they happened.
func (s *state) balanceAfter(ai uint32, d, c, x int) (balances, uint16) {
	a := s.accounts.at(ai)
	var b balances
	flags := a.flags0
	i, j, k := 0, 0, 0
	if n := (d + c + x) / ckptEvery; n > 0 {
		ck := a.ckpts.at(n - 1)
		b, flags = ck.balances, ck.flags
		i, j, k = int(ck.d), int(ck.c), int(ck.x)
	}
	for i < d || j < c || k < x {
		// The earliest of the next debit, credit and expiry: transfers in
		// arena order, an expiry before the transfers stored after it.
		next := ^uint32(0)
		if i < d {
			next = a.debits.at(i)
		}
		if j < c {
			next = min(next, a.credits.at(j))
		}
		if k < x {
			if e := s.expired.at(a.expired.at(k)); e.after <= next {
				p := s.transfers.at(e.xfer)
				s.undoPending(&b, &flags, p, p.dr == ai)
				k++
				continue
			}
		}
		debit := i < d && a.debits.at(i) == next
		if debit {
			i++
		} else {
			j++
		}
		s.applyTransfer(&b, &flags, s.transfers.at(next), debit)
	}
	return b, flags
}

// applyTransfer adds transfer x to the balances and flags of its debit
// account (debit) or its credit account.
func (s *state) applyTransfer(b *balances, flags *uint16, x *xfer, debit bool) {
	pend, post, closing := &b.cPend, &b.cPost, uint16(tfClosingCr)
	if debit {
		pend, post, closing = &b.dPend, &b.dPost, tfClosingDr
	}
	switch f := x.flags; {
	case f&tfPending != 0:
		*pend, _ = pend.Add(x.amount)
		if f&closing != 0 {
			*flags |= afClosed
		}
	case f&tfPost != 0:
		*pend, _ = pend.Sub(s.transfers.at(x.pending).amount)
		*post, _ = post.Add(x.amount)
	case f&tfVoid != 0:
		s.undoPending(b, flags, s.transfers.at(x.pending), debit)
	default:
		*post, _ = post.Add(x.amount)
	}
}

// undoPending takes pending transfer p back out of the balances and flags
// of its debit account (debit) or its credit account: a void or an expiry.
func (s *state) undoPending(b *balances, flags *uint16, p *xfer, debit bool) {
	pend, closing := &b.cPend, uint16(tfClosingCr)
	if debit {
		pend, closing = &b.dPend, tfClosingDr
	}
	*pend, _ = pend.Sub(p.amount)
	if p.flags&closing != 0 {
		*flags &^= afClosed
	}
}
