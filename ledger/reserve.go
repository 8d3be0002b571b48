package ledger

import (
	"context"
	"errors"
	"fmt"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// ErrReservationExpired means a reservation's timeout passed before Commit:
// its units have already returned.
var ErrReservationExpired = errors.New("ledger: reservation expired")

// Reservation is units held for a user by one pending transfer, as for
// Acquire, that the caller ends: Cancel gives them back at once (a void),
// Commit keeps them for good (a post). A reservation must end with Commit or
// Cancel, or it expires after its resource's window and its units return,
// which makes the window a lease: the units of a crashed holder come back.
// Use it for concurrency (in-flight) limits: reserve when a request starts,
// cancel when it ends.
//
// A Reservation is safe for concurrent use; Commit and Cancel are
// idempotent (a retry after a lost reply is safe).
type Reservation struct {
	c   *Client
	res Resource
	u   *user
	d   Decision
	t   tb.Transfer
}

// Reserve holds req.Amount units of r for req.User until Commit, Cancel or
// r.Window passes. When the limit denies, the Reservation is not OK and its
// Decision says why; Commit and Cancel then do nothing.
func (c *Client) Reserve(ctx context.Context, r Resource, req Request) (*Reservation, error) {
	if err := validPart(r, &req); err != nil {
		return nil, err
	}
	start := c.observeStart()
	ds, o, err := c.acquire(ctx, []Part{{Resource: r, Request: req}}, false, nil)
	c.observe(start, []Part{{Resource: r, Request: req}}, ds, err)
	if len(ds) == 0 {
		return nil, err
	}
	rv := &Reservation{c: c, res: r, u: c.users.get(r, req.User), d: ds[0]}
	rv.t = tb.Transfer{
		DebitAccountID:  rv.u.id.tb(),
		CreditAccountID: OperatorID(r.Ledger).tb(),
		Ledger:          r.Ledger,
		Code:            codeAcquire,
	}
	unanswered := rv.d.Reason == Unavailable
	if !unanswered && (err != nil || !rv.OK()) {
		return rv, err
	}
	rv.t.PendingID = o.chain[o.first()].ID
	if unanswered {
		// No answer, which may still come: o is no longer this call's to
		// read. The hold may or may not exist, admitted by the policy
		// (FailOpen) or not: Cancel voids it if it does.
		return rv, err
	}
	if _, _, earlier := chainOutcome(o.decision()); earlier && o.marked {
		// Admitted by an earlier attempt under the request's ID, whose
		// hold carries the ID: find it.
		if rv.t.PendingID, err = c.heldFor(ctx, r, req.ID); err != nil {
			return nil, err
		}
	}
	return rv, nil
}

// heldFor finds the hold on r that an attempt under request ID key took.
func (c *Client) heldFor(ctx context.Context, r Resource, key ID) (tb.Uint128, error) {
	f := tb.QueryFilter{UserData128: key.tb(), Ledger: r.Ledger, Code: codeAcquire}
	ts, err := c.conn.QueryTransfers(ctx, &f, 16)
	if err != nil {
		return tb.Uint128{}, err
	}
	for _, t := range ts {
		if t.TransferFlags().Pending {
			return t.ID, nil
		}
	}
	return tb.Uint128{}, fmt.Errorf("ledger: the hold admitted under %s was not found", key)
}

// OK reports whether the units were reserved.
func (r *Reservation) OK() bool { return r.d.Allowed }

// Decision returns the decision that made the reservation.
func (r *Reservation) Decision() Decision { return r.d }

// Cancel gives the units back now. Cancelling a reservation that expired,
// was cancelled before, or was denied is not an error. A reservation the
// cluster did not answer (Reason Unavailable, allowed or not by the
// Client's OnUnavailable) may hold units or not: Cancel voids them if it does,
// so that they do not stay held until the window passes.
func (r *Reservation) Cancel(ctx context.Context) error {
	if !r.OK() && r.d.Reason != Unavailable {
		return nil
	}
	s, err := r.end(ctx, roleCancel, tb.TransferFlags{VoidPendingTransfer: true})
	if err != nil {
		return err
	}
	switch classifyEnd(s) {
	case endedNow, endExpired, endVoidedYet:
		return nil
	case endNoHold:
		if r.d.Reason == Unavailable {
			return nil // admitted open, and the hold was never made
		}
	}
	return fmt.Errorf("ledger: cancel reservation %s: %w", r.d.ID, transferStatusError(0, s))
}

// Commit keeps the units for good: they never return (a post). It fails
// with ErrReservationExpired when the reservation's window passed first.
func (r *Reservation) Commit(ctx context.Context) error {
	if !r.OK() {
		return fmt.Errorf("ledger: commit of a denied reservation %s", r.d.ID)
	}
	s, err := r.end(ctx, roleCommit, tb.TransferFlags{PostPendingTransfer: true})
	if err != nil {
		return err
	}
	switch classifyEnd(s) {
	case endedNow, endPostedYet:
		return nil
	case endExpired:
		return fmt.Errorf("%w: %s", ErrReservationExpired, r.d.ID)
	}
	return fmt.Errorf("ledger: commit reservation %s: %w", r.d.ID, transferStatusError(0, s))
}

// end posts or voids the pending transfer with an ID derived from it, so
// that a retry is applied once.
func (r *Reservation) end(ctx context.Context, role byte, flags tb.TransferFlags) (tb.CreateTransferStatus, error) {
	t := r.t
	t.ID = endID(role, fromTB(r.t.PendingID)).tb()
	t.Flags = flags.ToUint16()
	if flags.PostPendingTransfer {
		t.Amount = tb.AmountMax // the whole pending amount
	}
	o := &op{}
	o.add(t, r.u)
	if err := r.c.submit(ctx, o); err != nil {
		return 0, err
	}
	return o.res[0].Status, nil
}
