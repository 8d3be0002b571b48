package ratelimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// Costs known after the call: a rule's charges (Rule.ChargeAfter) and the
// checks and charges it pairs by a request's ID (Rule.ReserveKey,
// Rule.SettleKey).

// pairID is the ID of the hold that the check of request reqID makes on
// its rule for its user, and, with a suffix, of what its charge records:
// the same in every server that shares the cluster. A descriptor that names
// no request (a charge_after rule's) has none: zero.
func (it *item) pairID(suffix string) ledger.ID {
	if it.reqID == "" {
		return ledger.ID{}
	}
	return ledger.KeyID("envoy\x00" + it.rule.spec + "\x00" + it.user + "\x00" + it.reqID + suffix)
}

// request is what it asks of its rule's resource: amount units, with its
// limit as the user's plan.
func (it *item) request(amount uint64, id ledger.ID) ledger.Request {
	return ledger.Request{User: it.user, Amount: amount, ID: id, Limit: uint64(it.limit)}
}

// after records the charges of items, and settles their paired checks.
// They never refuse the request: a charge is a cost already incurred.
func (s *Service) after(ctx context.Context, items []item) error {
	for i := range items {
		it := &items[i]
		if it.part != partAfter {
			continue
		}
		it.part = partNone
		var d ledger.Decision
		var err error
		if it.cost == costSettle {
			d, err = s.settlePair(ctx, it)
		} else {
			d, err = s.settleCheck(ctx, it)
		}
		if err != nil {
			return err
		}
		k := detailDecision
		if d.Timestamp == 0 {
			k = detailLimit // settled without a decision: the limit is what it tells
		}
		s.settle(it, d, k)
	}
	return nil
}

// settlePair settles the hold that its check made, found by the request's
// ID (settleHold); a charge whose check is unknown (denied, or never seen)
// is charged whole.
func (s *Service) settlePair(ctx context.Context, it *item) (d ledger.Decision, err error) {
	rv, err := s.c.ReservationFor(ctx, it.rule.res, it.user, it.pairID(""))
	switch {
	case errors.Is(err, ledger.ErrUnknownReservation):
		rv = nil
	case err != nil:
		return d, err
	}
	return s.settleHold(ctx, it, rv)
}

// settleHold settles rv, the hold of its check, to its hits: kept until the
// hold's window ends, the rest given back, hits beyond the hold charged. A
// charge with no hold (nil), or whose hold expired or was cancelled (a
// request another descriptor refused), is charged whole; one whose hold was
// settled before is this charge sent again. A pair's charges are named by
// the request's ID, so a charge sent again is recorded once.
func (s *Service) settleHold(ctx context.Context, it *item, rv *ledger.Reservation) (d ledger.Decision, err error) {
	settled := ledger.Settled(uint64(it.limit))
	if rv == nil {
		return s.chargePart(ctx, it, it.hits, "\x00charge", settled)
	}
	held := rv.Amount()
	if n := min(it.hits, held); n == 0 {
		err = rv.Cancel(ctx)
	} else {
		err = rv.CommitN(ctx, n)
	}
	switch {
	case errors.Is(err, ledger.ErrReservationExpired), errors.Is(err, ledger.ErrReservationCancelled):
		return s.chargePart(ctx, it, it.hits, "\x00charge", settled)
	case errors.Is(err, ledger.ErrReservationEnded):
		return settled, nil // settled before: this charge sent again
	case err != nil:
		return d, err
	}
	return s.chargePart(ctx, it, it.hits-min(it.hits, held), "\x00excess", settled)
}

// chargePart charges n of its hits under the pair's ID with suffix (none,
// for a descriptor that names no request); 0 hits answer settled.
func (s *Service) chargePart(ctx context.Context, it *item, n uint64, suffix string, settled ledger.Decision) (ledger.Decision, error) {
	if n == 0 {
		return settled, nil
	}
	return s.charge(ctx, it, n, it.pairID(suffix))
}

// charge records n of its hits as a cost already incurred (named id, if
// not zero); what found nothing left to take is its user's debt.
func (s *Service) charge(ctx context.Context, it *item, n uint64, id ledger.ID) (ledger.Decision, error) {
	ch, err := s.c.Charge(ctx, it.rule.res, it.request(n, id))
	if err != nil {
		return ch.Decision, err
	}
	// What it found no room for counts until the charge's window ends.
	until := time.Unix(0, int64(ch.Timestamp)).Add(it.rule.res.Window)
	s.debts.add(it.debtKey(), n-min(n, ch.Taken), until)
	return ch.Decision, nil
}

// payDebts charges the debts of the users of the checks among items
// before they are checked: a check then finds nothing left while a debt is
// unpaid, and the calls after a charge that went past the limit wait until
// what it cost has returned, not only what it found. Checks of one user
// pay its debt one at a time, so that none is answered while another pays.
func (s *Service) payDebts(ctx context.Context, items []item) error {
	for i := range items {
		it := &items[i]
		if it.part != partCheck && it.part != partReserve || it.cost == costTake {
			continue
		}
		if err := s.debts.pay(it.debtKey(), func(owed uint64, until time.Time) (uint64, error) {
			ch, err := s.c.ChargeUntil(ctx, it.rule.res, it.request(owed, ledger.ID{}), until)
			return ch.Taken, err
		}); err != nil {
			return err
		}
	}
	return nil
}

// debtKey names its rule and user among debts.
func (it *item) debtKey() string { return it.rule.spec + "\x00" + it.user }

// debts are the hits of charges that found less left than they cost, by
// rule and user: each server keeps its own, in memory, and charges them
// before it answers that user's next check, held until the window of the
// charge that owed them ends (ledger.Client.ChargeUntil), so that the record
// counts them in the windows they were used in, as soon as it has room. A
// debt whose window has passed is forgotten (ChargeUntil charges nothing
// for it, and each new debt sweeps a few of those away). At most maxDebts
// users owe at once; a debt beyond them is forgotten too (the record, which never holds
// more than the limit, is then all that holds the user back).
type debts struct {
	mu sync.Mutex
	m  map[string]*debt
}

// debt is what one user owes, until when; its mutex is held while it is
// paid.
type debt struct {
	mu    sync.Mutex
	owed  uint64
	until time.Time // the latest end of the windows of the charges that owe it
}

const maxDebts = 1 << 16

func (d *debts) add(key string, n uint64, until time.Time) {
	if n == 0 {
		return
	}
	d.mu.Lock()
	if d.m == nil {
		d.m = map[string]*debt{}
	}
	d.sweep(time.Now())
	e := d.m[key]
	if e == nil && len(d.m) < maxDebts {
		e = &debt{}
		d.m[key] = e
	}
	d.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		e.owed += n
		if until.After(e.until) {
			e.until = until
		}
		e.mu.Unlock()
	}
}

// sweep forgets the debts of a few users whose windows have passed (by
// this server's clock, a second late), unless they are being paid. d.mu is
// held.
func (d *debts) sweep(now time.Time) {
	swept := 0
	for k, e := range d.m {
		if swept++; swept > sweepKeys {
			return
		}
		if !e.mu.TryLock() {
			continue
		}
		if e.until.Add(time.Second).Before(now) {
			delete(d.m, k)
		}
		e.mu.Unlock()
	}
}

// pay pays key's debt, if any, with charge, which returns what it took of
// what is owed until when; what it did not take is still owed.
func (d *debts) pay(key string, charge func(owed uint64, until time.Time) (uint64, error)) error {
	d.mu.Lock()
	e := d.m[key]
	d.mu.Unlock()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.owed == 0 {
		return nil
	}
	taken, err := charge(e.owed, e.until)
	if err != nil {
		return err
	}
	if e.owed -= min(e.owed, taken); e.owed == 0 {
		d.mu.Lock()
		if d.m[key] == e {
			delete(d.m, key)
		}
		d.mu.Unlock()
	}
	return nil
}

// reserve holds the hits of the paired checks among items, each under its
// request's ID (a check sent again holds once). It returns the
// reservations made, and whether one was denied, which refuses the request.
func (s *Service) reserve(ctx context.Context, items []item) (held []*ledger.Reservation, refused bool, err error) {
	for i := range items {
		it := &items[i]
		if it.part != partReserve {
			continue
		}
		it.part = partNone
		req := it.request(it.hits, it.pairID(""))
		if it.cost == costCharge {
			req = it.request(it.rule.estimate.get(uint64(it.limit)), ledger.ID{})
		}
		rv, err := s.c.Reserve(ctx, it.rule.res, req)
		switch {
		case errors.Is(err, ledger.ErrIDReused):
			// Held already under the ID, for other hits: a check sent again.
			s.settle(it, ledger.Settled(uint64(it.limit)), detailLimit)
			continue
		case err != nil:
			return held, false, err
		}
		if s.settle(it, rv.Decision(), detailDecision) {
			return held, true, nil
		}
		if rv.OK() {
			held = append(held, rv)
			if it.cost == costCharge {
				s.provisional.push(it.debtKey(), rv, it.rule.res.Window)
			}
		}
	}
	return held, false, nil
}

// settleCheck records the charge after a call: it settles the oldest hold
// that a check of its user made in this server (the check before the call,
// most likely) to its hits (settleHold). Each charge teaches its rule what
// calls cost lately.
func (s *Service) settleCheck(ctx context.Context, it *item) (ledger.Decision, error) {
	it.rule.estimate.add(it.hits)
	return s.settleHold(ctx, it, s.provisional.pop(it.debtKey()))
}

// provisional are the holds that checks before calls made, by rule and
// user, oldest first, until the charges after the calls settle them. A hold
// whose charge comes to another server, or never, returns with its window,
// and is forgotten here then: each push looks at a few other users' holds
// and drops those past their window, so that memory follows the users of
// the last window, not every user ever seen.
type provisional struct {
	mu sync.Mutex
	m  map[string][]heldCheck
}

// heldCheck is a check's hold, and when this server stops waiting for its
// charge (its window, by this server's clock).
type heldCheck struct {
	rv      *ledger.Reservation
	expires time.Time
}

// maxProvisional bounds the holds kept for one user: past it, the oldest
// is left to its window.
const maxProvisional = 4096

// sweepKeys is how many other users' holds a push looks at.
const sweepKeys = 4

func (p *provisional) push(key string, rv *ledger.Reservation, window time.Duration) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string][]heldCheck{}
	}
	swept := 0
	for k, q := range p.m {
		if swept++; swept > sweepKeys {
			break
		}
		if q = live(q, now); len(q) == 0 {
			delete(p.m, k)
		} else {
			p.m[k] = q
		}
	}
	q := live(p.m[key], now)
	if len(q) >= maxProvisional {
		q = q[1:]
	}
	p.m[key] = append(q, heldCheck{rv: rv, expires: now.Add(window + time.Second)})
}

// live is q without the holds past their window, at now.
func live(q []heldCheck, now time.Time) []heldCheck {
	i := 0
	for i < len(q) && !q[i].expires.After(now) {
		q[i] = heldCheck{}
		i++
	}
	return q[i:]
}

// pop removes and returns key's oldest hold still in its window, nil if
// none.
func (p *provisional) pop(key string) *ledger.Reservation {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := live(p.m[key], time.Now())
	if len(q) == 0 {
		delete(p.m, key)
		return nil
	}
	rv := q[0].rv
	if q[0] = (heldCheck{}); len(q) == 1 {
		delete(p.m, key)
	} else {
		p.m[key] = q[1:]
	}
	return rv
}

// estimate is what a rule's calls cost lately: a moving average of its
// charges (an eighth of each new one).
type estimate struct{ avg atomic.Uint64 }

// get is the estimate, for a key whose limit is limit: before the rule's
// first charge, an eighth of the limit (at least 1), so that the checks of
// a rule whose calls are not known yet admit a few calls, not every caller
// at once; after it, what calls cost lately, at most the limit.
func (e *estimate) get(limit uint64) uint64 {
	if avg := e.avg.Load(); avg != 0 {
		return min(avg, max(limit, 1))
	}
	return max(limit/8, 1)
}

func (e *estimate) add(n uint64) {
	for {
		old := e.avg.Load()
		next := n
		if old != 0 {
			next = old - old/8 + n/8
		}
		if e.avg.CompareAndSwap(old, next) {
			return
		}
	}
}

// release gives back what the checks of a refused request held.
func (s *Service) release(held []*ledger.Reservation) {
	if len(held) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, rv := range held {
		_ = rv.Cancel(ctx) // unreleased, its units return with its window: conservative
	}
}
