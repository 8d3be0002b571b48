package ratelimit

import (
	"context"
	"errors"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// Costs known after the call: a rule's charges (Rule.ChargeAfter) and the
// checks and charges it pairs by a request's ID (Rule.ReserveKey,
// Rule.SettleKey).

// pairID is the ID of the hold that the check of request reqID makes on
// its rule for its user, and, with a suffix, of what its charge records:
// the same in every server that shares the cluster.
func (it *item) pairID(suffix string) ledger.ID {
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
			d, err = s.c.Charge(ctx, it.rule.res, it.request(it.hits, ledger.ID{}))
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

// settlePair settles the hold that its check made to its hits: kept until
// the hold's window ends, the rest given back; hits beyond the hold are
// charged. A charge whose check is unknown, or whose hold expired, is
// charged whole. Each part is named by the request's ID: a charge sent
// again is recorded once.
func (s *Service) settlePair(ctx context.Context, it *item) (ledger.Decision, error) {
	settled := ledger.Decision{Allowed: true, Reason: ledger.Admitted, Limit: uint64(it.limit)}
	rv, err := s.c.ReservationFor(ctx, it.rule.res, it.pairID(""))
	switch {
	case errors.Is(err, ledger.ErrUnknownReservation):
		return s.chargePart(ctx, it, it.hits, "\x00charge", settled) // the check was denied, or never came
	case err != nil:
		return ledger.Decision{}, err
	}
	held := rv.Amount()
	if n := min(it.hits, held); n == 0 {
		err = rv.Cancel(ctx)
	} else {
		err = rv.CommitN(ctx, n)
	}
	switch {
	case errors.Is(err, ledger.ErrReservationExpired):
		return s.chargePart(ctx, it, it.hits, "\x00charge", settled)
	case errors.Is(err, ledger.ErrReservationEnded):
		return settled, nil // settled before: this charge sent again
	case err != nil:
		return ledger.Decision{}, err
	}
	return s.chargePart(ctx, it, it.hits-min(it.hits, held), "\x00excess", settled)
}

// chargePart charges n of its hits under the pair's ID with suffix; none
// answers settled.
func (s *Service) chargePart(ctx context.Context, it *item, n uint64, suffix string, settled ledger.Decision) (ledger.Decision, error) {
	if n == 0 {
		return settled, nil
	}
	return s.c.Charge(ctx, it.rule.res, it.request(n, it.pairID(suffix)))
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
		rv, err := s.c.Reserve(ctx, it.rule.res, it.request(it.hits, it.pairID("")))
		switch {
		case errors.Is(err, ledger.ErrIDReused):
			// Held already under the ID, for other hits: a check sent again.
			s.settle(it, ledger.Decision{Allowed: true, Reason: ledger.Admitted, Limit: uint64(it.limit)}, detailLimit)
			continue
		case err != nil:
			return held, false, err
		}
		if s.settle(it, rv.Decision(), detailDecision) {
			return held, true, nil
		}
		if rv.OK() {
			held = append(held, rv)
		}
	}
	return held, false, nil
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
