package ledger

import (
	"context"
	"errors"
	"fmt"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

var (
	// ErrReservationExpired means a reservation's timeout passed before Commit:
	// its units have already returned.
	ErrReservationExpired = errors.New("ledger: reservation expired")
	// ErrReservationEnded means a reservation was ended otherwise before:
	// cancelled before a Commit, or committed with another amount.
	ErrReservationEnded = errors.New("ledger: reservation already ended")
	// ErrUnknownReservation means no reservation has the hold ID given to
	// Client.Reservation.
	ErrUnknownReservation = errors.New("ledger: unknown reservation")
)

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
		Amount:          tb.ToUint128(req.Amount),
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

// Resource returns the resource the units are reserved on.
func (r *Reservation) Resource() Resource { return r.res }

// Cancel gives the units back now. Cancelling a reservation that expired,
// was cancelled before, or was denied is not an error. A reservation the
// cluster did not answer (Reason Unavailable, allowed or not by the
// Client's OnUnavailable) may hold units or not: Cancel voids them if it does,
// so that they do not stay held until the window passes.
func (r *Reservation) Cancel(ctx context.Context) error {
	if !r.OK() && r.d.Reason != Unavailable {
		return nil
	}
	s, err := r.end(ctx, roleCancel, tb.TransferFlags{VoidPendingTransfer: true}, tb.Uint128{})
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
// Commit is shorthand for CommitN with all of the reserved units.
func (r *Reservation) Commit(ctx context.Context) error {
	return r.commit(ctx, tb.AmountMax) // the whole pending amount
}

// CommitN keeps n of the reserved units for good and gives the rest back
// now: for work that used less than it reserved. n must be from 1 to the
// reserved amount (ErrInvalidAmount otherwise; Cancel keeps none). A retry
// with the same n is safe; a commit with another n than the first, or
// after a Cancel, is ErrReservationEnded.
func (r *Reservation) CommitN(ctx context.Context, n uint64) error {
	if n == 0 || n > r.amount() {
		return fmt.Errorf("%w: commit %d of reservation %s of %d", ErrInvalidAmount, n, r.d.ID, r.amount())
	}
	return r.commit(ctx, tb.ToUint128(n))
}

func (r *Reservation) commit(ctx context.Context, amount tb.Uint128) error {
	if !r.OK() {
		return fmt.Errorf("ledger: commit of a denied reservation %s", r.d.ID)
	}
	s, err := r.end(ctx, roleCommit, tb.TransferFlags{PostPendingTransfer: true}, amount)
	if err != nil {
		return err
	}
	switch classifyEnd(s) {
	case endedNow, endPostedYet:
		return nil
	case endExpired:
		return fmt.Errorf("%w: %s", ErrReservationExpired, r.d.ID)
	case endVoidedYet:
		return fmt.Errorf("%w: %s was cancelled", ErrReservationEnded, r.d.ID)
	}
	if s == tb.TransferExistsWithDifferentAmount {
		return fmt.Errorf("%w: %s was committed with another amount", ErrReservationEnded, r.d.ID)
	}
	return fmt.Errorf("ledger: commit reservation %s: %w", r.d.ID, transferStatusError(0, s))
}

// amount is how many units the reservation holds.
func (r *Reservation) amount() uint64 {
	n, _ := u64(r.t.Amount)
	return n
}

// Hold returns the ID of the pending transfer that holds the reservation's
// units (zero when it was denied): Client.Reservation finds the
// reservation again by it, in this process or another. It is
// Decision().ID unless an earlier attempt under the request's ID was
// denied (see Request.ID).
func (r *Reservation) Hold() ID {
	if !r.OK() {
		return ID{}
	}
	return fromTB(r.t.PendingID)
}

// Reservation returns the reservation whose units the pending transfer hold
// holds (see Reservation.Hold), so that a reservation made by one call, or
// one process, can be committed or cancelled by another. It reads the hold
// and its resource from the cluster; the Reservation's Decision has only
// Allowed, Reason, ID and Timestamp set. It is ErrUnknownReservation when no
// reservation has that hold; one that expired or ended is found, and its
// Commit or Cancel says so.
func (c *Client) Reservation(ctx context.Context, hold ID) (*Reservation, error) {
	ts, err := c.conn.LookupTransfers(ctx, []tb.Uint128{hold.tb()})
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 || !ts[0].TransferFlags().Pending || ts[0].Code != codeAcquire {
		return nil, fmt.Errorf("%w: %s", ErrUnknownReservation, hold)
	}
	t := ts[0]
	r, err := c.Resource(ctx, t.Ledger)
	if err != nil {
		return nil, err
	}
	key, err := c.keyOf(ctx, r, fromTB(t.DebitAccountID))
	if err != nil {
		return nil, err
	}
	id := hold
	if t.UserData128 != (tb.Uint128{}) {
		id = fromTB(t.UserData128) // the request's name, when not the hold's
	}
	rv := &Reservation{c: c, res: r, d: Decision{Allowed: true, Reason: Admitted, ID: id, Timestamp: t.Timestamp}}
	if key != "" {
		rv.u = c.users.get(r, key)
	}
	rv.t = tb.Transfer{
		DebitAccountID:  t.DebitAccountID,
		CreditAccountID: t.CreditAccountID,
		Amount:          t.Amount,
		PendingID:       t.ID,
		Ledger:          t.Ledger,
		Code:            codeAcquire,
	}
	return rv, nil
}

// keyOf is the key of the user whose account on r is uid, "" when it is
// not kept (then the Client's view of the user is not told of the
// reservation's end, and counts its units until its next read).
func (c *Client) keyOf(ctx context.Context, r Resource, uid ID) (string, error) {
	a, ok, err := c.lookupAccount(ctx, uid)
	if err != nil || !ok {
		return "", err
	}
	if key := keyFromUserData(a.UserData128); key != "" && UserID(r.Ledger, key) == uid {
		return key, nil
	}
	long, err := c.longKeys(ctx, r.Ledger, []ID{uid}, func(key string) ID { return UserID(r.Ledger, key) })
	return long[uid], err
}

// end posts (amount of) or voids the pending transfer with an ID derived
// from it, so that a retry is applied once.
func (r *Reservation) end(ctx context.Context, role byte, flags tb.TransferFlags, amount tb.Uint128) (tb.CreateTransferStatus, error) {
	t := r.t
	t.ID = endID(role, fromTB(r.t.PendingID)).tb()
	t.Flags = flags.ToUint16()
	t.Amount = amount
	o := &op{}
	o.add(t, r.u)
	if err := r.c.submit(ctx, o); err != nil {
		return 0, err
	}
	return o.res[0].Status, nil
}
