package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tblimit/tblimit/ledger/internal/status"
	tb "github.com/tigerbeetle/tigerbeetle-go"
)

var (
	// ErrReservationExpired means a reservation's timeout passed before Commit:
	// its units have already returned.
	ErrReservationExpired = errors.New("ledger: reservation expired")
	// ErrReservationEnded means a reservation was ended otherwise before:
	// cancelled before a Commit, or committed with another amount.
	ErrReservationEnded = errors.New("ledger: reservation already ended")
	// ErrReservationCancelled means a reservation was cancelled (or given
	// back by Reset) before a Commit: it is ErrReservationEnded too.
	ErrReservationCancelled = fmt.Errorf("%w: cancelled", ErrReservationEnded)
	// ErrUnknownReservation means no reservation has the hold ID given to
	// Client.Reservation.
	ErrUnknownReservation = errors.New("ledger: unknown reservation")
)

// Reservation is units held for a user by one pending transfer, as for
// Acquire, that the caller ends: Cancel gives them back at once; Commit
// keeps them, all or some, until the reservation's window ends, and gives
// the rest back at once. Nothing a reservation does lowers a user's limit
// for good: every unit it took returns at the latest one window after the
// reservation was made. A reservation must end with Commit or Cancel, or it
// expires after its resource's window and its units return, which makes the
// window a lease: the units of a crashed holder come back.
//
// Use it for work whose cost is known only after it is done (reserve the
// most an LLM call can use, commit the tokens it used), and for concurrency
// (in-flight) limits: reserve when a request starts, cancel when it ends.
// An authorization (Client.Authorize) is a Reservation too: Commit captures
// the payment, Cancel releases it.
//
// A Reservation is safe for concurrent use; Commit and Cancel are
// idempotent (a retry after a lost reply is safe).
type Reservation struct {
	c   *Client
	res Resource
	u   *user
	d   Decision
	// t is the hold as its ends name it: PendingID is its ID, Amount,
	// Timeout, accounts, ledger, code and user data are the hold's.
	t tb.Transfer
	// heldAt is the cluster time the hold was made (0 when not known: the
	// cluster did not answer).
	heldAt uint64
	// pay is an authorization's pending payment on the currency ledger,
	// nil for a plain reservation.
	pay *tb.Transfer
}

// Reserve holds req.Amount units of r for req.User until Commit, Cancel or
// r.Window passes. When the limit denies, the Reservation is not OK and its
// Decision says why; Commit and Cancel then do nothing.
func (c *Client) Reserve(ctx context.Context, r Resource, req Request) (*Reservation, error) {
	if err := validPart(r, &req); err != nil {
		return nil, err
	}
	start := c.observeStart()
	a, err := c.acquire(ctx, []Part{{Resource: r, Request: req}}, false, codeReserve, nil)
	c.observe(start, []Part{{Resource: r, Request: req}}, a.ds, err)
	if len(a.ds) == 0 {
		return nil, err
	}
	rv := c.newReservation(Part{Resource: r, Request: req}, a.ds[0])
	unanswered := rv.d.Reason == Unavailable
	if !unanswered && (err != nil || !rv.OK()) {
		return rv, err
	}
	rv.t.PendingID, rv.heldAt = a.hold, rv.d.Timestamp
	if unanswered {
		// No answer, which may still come: the hold may or may not exist,
		// admitted by the policy (FailOpen) or not: Cancel voids it if it
		// does.
		return rv, err
	}
	if a.earlier && a.marked {
		// Admitted by an earlier attempt under the request's ID, whose
		// hold carries the ID: find it.
		held, err := c.heldUnder(ctx, r.Ledger, codeReserve, req.ID, false)
		if err != nil {
			return nil, err
		}
		rv.t.PendingID, rv.heldAt = held.ID, held.Timestamp
	}
	return rv, nil
}

// newReservation is the reservation of part p decided d, its hold not
// named yet (PendingID and heldAt are the caller's to set once known).
func (c *Client) newReservation(p Part, d Decision) *Reservation {
	secs, _ := WindowSeconds(p.Resource.Window)
	u := c.users.get(p.Resource, p.Request.User)
	return &Reservation{c: c, res: p.Resource, u: u, d: d, t: tb.Transfer{
		DebitAccountID:  u.id.tb(),
		CreditAccountID: OperatorID(p.Resource.Ledger).tb(),
		Amount:          tb.ToUint128(p.Request.Amount),
		Timeout:         secs,
		Ledger:          p.Resource.Ledger,
		Code:            codeReserve,
		UserData64:      p.Request.Ref,
	}}
}

// ReserveAll reserves every part or none: one linked chain of holds, as
// AcquireAll takes them, each then ended on its own by its Reservation's
// Commit or Cancel (a call's tokens per minute, its requests per minute and
// its daily budget, reserved at once and settled each to what the call
// used). When a part denies, every Reservation is not OK and says why. Only
// the first part takes a request ID, which names the chain.
func (c *Client) ReserveAll(ctx context.Context, parts []Part) ([]*Reservation, error) {
	parts, err := validChain(parts)
	if err != nil {
		return nil, err
	}
	start := c.observeStart()
	a, err := c.acquire(ctx, parts, false, codeReserve, nil)
	ds := a.ds
	c.observe(start, parts, ds, err)
	if len(ds) != len(parts) {
		return nil, err
	}
	rvs := make([]*Reservation, len(parts))
	for i, p := range parts {
		rvs[i] = c.newReservation(p, ds[i])
	}
	if err != nil || !ds[0].Allowed || ds[0].Reason == Unavailable {
		return rvs, err // denied, or unanswered: no hold to name
	}
	if a.earlier {
		// Reserved before under the request's ID: its first hold is named
		// by the ID (or carries it, for a later attempt than the first),
		// the others carry the first's.
		if err := c.chainHeldFor(ctx, parts, rvs, a.marked); err != nil {
			return nil, err
		}
		return rvs, nil
	}
	if len(parts) == 1 { // its answer names its one hold, and keeps no chain
		rvs[0].t.PendingID, rvs[0].heldAt = a.hold, ds[0].Timestamp
		return rvs, nil
	}
	for k, i := range a.holds {
		rvs[k].t.PendingID, rvs[k].heldAt = a.chain[i].ID, ds[k].Timestamp
	}
	return rvs, nil
}

// chainHeldFor finds the holds of a chain of parts that an attempt under
// the first part's request ID took, for rvs: the first attempt (whose first
// hold is named by the ID) or, when marked, a later one.
func (c *Client) chainHeldFor(ctx context.Context, parts []Part, rvs []*Reservation, marked bool) error {
	first, err := c.heldUnder(ctx, parts[0].Resource.Ledger, codeReserve, parts[0].Request.ID, !marked)
	if err != nil {
		return err
	}
	rvs[0].t.PendingID, rvs[0].heldAt = first.ID, first.Timestamp
	for i := 1; i < len(parts); i++ {
		f := tb.QueryFilter{UserData128: first.ID, Ledger: parts[i].Resource.Ledger, Code: codeReserve}
		ts, err := c.conn.QueryTransfers(ctx, &f, 16)
		if err != nil {
			return err
		}
		for _, t := range ts {
			if t.TransferFlags().Pending && t.DebitAccountID == rvs[i].t.DebitAccountID {
				rvs[i].t.PendingID, rvs[i].heldAt = t.ID, t.Timestamp
			}
		}
		if rvs[i].t.PendingID == (tb.Uint128{}) {
			return fmt.Errorf("ledger: hold %d of the chain admitted under %s was not found", i, parts[0].Request.ID)
		}
	}
	return nil
}

// heldUnder finds the hold of code on ledger that an attempt under request
// ID key took: named by key when the first attempt under it took it
// (named), else carrying key, as a later attempt's hold does (see pipeline.NewAttempt).
func (c *Client) heldUnder(ctx context.Context, ledger uint32, code uint16, key ID, named bool) (tb.Transfer, error) {
	var ts []tb.Transfer
	var err error
	if named {
		ts, err = c.conn.LookupTransfers(ctx, []tb.Uint128{key.tb()})
	} else {
		f := tb.QueryFilter{UserData128: key.tb(), Ledger: ledger, Code: code}
		ts, err = c.conn.QueryTransfers(ctx, &f, 16)
	}
	if err != nil {
		return tb.Transfer{}, err
	}
	for _, t := range ts {
		if t.TransferFlags().Pending && t.Code == code && t.Ledger == ledger {
			return t, nil
		}
	}
	return tb.Transfer{}, fmt.Errorf("%w: no hold admitted under %s", ErrUnknownReservation, key)
}

// ReservationFor returns the reservation that user's Reserve on r made
// under request ID id (Request.ID), as Reservation finds one by its hold
// but without reading the resource and the user, which the caller names:
// one request (two when an attempt under id was denied before the one that
// reserved). It is ErrUnknownReservation when none was made for user, or
// only denied.
func (c *Client) ReservationFor(ctx context.Context, r Resource, user string, id ID) (*Reservation, error) {
	key, err := NormalizeKey(user)
	if err != nil {
		return nil, err
	}
	t, err := c.heldUnder(ctx, r.Ledger, codeReserve, id, true) // the hold is named id...
	if errors.Is(err, ErrUnknownReservation) {
		t, err = c.heldUnder(ctx, r.Ledger, codeReserve, id, false) // ...unless an attempt under it was denied first
	}
	if err != nil {
		return nil, err
	}
	if fromTB(t.DebitAccountID) != UserID(r.Ledger, key) {
		return nil, fmt.Errorf("%w: %s was not made for %q", ErrUnknownReservation, id, key)
	}
	return c.reservationOf(r, key, t, nil), nil
}

// OK reports whether the units were reserved.
func (r *Reservation) OK() bool { return r.d.Allowed }

// Decision returns the decision that made the reservation.
func (r *Reservation) Decision() Decision { return r.d }

// Resource returns the resource the units are reserved on.
func (r *Reservation) Resource() Resource { return r.res }

// Cancel gives the units back now (for an authorization: releases the
// payment, and its hold on the limit). Cancelling a reservation that
// expired, was cancelled before, or was denied is not an error; one that
// was committed is ErrReservationEnded, and keeps what its Commit kept. A
// reservation the cluster did not answer (Reason Unavailable, allowed or
// not by the Client's OnUnavailable) may hold units or not: Cancel voids
// them if it does, so that they do not stay held until the window passes.
func (r *Reservation) Cancel(ctx context.Context) error {
	if !r.OK() && r.d.Reason != Unavailable {
		return nil
	}
	res, err := r.send(ctx, r.ending(roleCancel, 0))
	if err != nil {
		return err
	}
	s := res[0].Status
	switch status.ClassifyEnd(s) {
	case status.EndedNow, status.EndExpired:
		return nil
	case status.EndVoidedYet:
		// Cancelled before, or given back by Reset; or voided by a Commit,
		// whose void has its own ID.
		committed, err := r.c.transferExists(ctx, endID(roleCommit, fromTB(r.t.PendingID)))
		if err != nil || !committed {
			return err
		}
		return fmt.Errorf("%w: %s was committed: cancel it before, not after", ErrReservationEnded, r.d.ID)
	case status.EndPostedYet:
		return fmt.Errorf("%w: %s was committed: cancel it before, not after", ErrReservationEnded, r.d.ID)
	case status.EndNoHold:
		if r.d.Reason == Unavailable {
			return nil // admitted open, and the hold was never made
		}
	}
	return fmt.Errorf("ledger: cancel reservation %s: %w", r.d.ID, chainError(res))
}

// Commit keeps all the reserved units until the reservation's window ends
// (for an authorization: captures the whole amount). Commit is shorthand
// for CommitN with all of the reserved units.
func (r *Reservation) Commit(ctx context.Context) error {
	return r.commit(ctx, r.amount())
}

// CommitN keeps n of the reserved units counted until the reservation's
// window ends, and gives the rest back now: for work that used less than it
// reserved (an LLM call's tokens, known once it answered). n must be from 1
// to the reserved amount (ErrInvalidAmount otherwise; Cancel keeps none).
// The kept units return one window after the reservation was made, rounded
// up to a whole second (and one more on a remote cluster, whose clock a
// Client knows from below): they may count a little long, never too short.
//
// For an authorization (Client.Authorize), CommitN captures n: n of the
// currency moves to the payee, the payer's limit keeps n for the rest of
// the window, and the rest of both comes back, all in one linked chain.
//
// It fails with ErrReservationExpired when the reservation's window passed
// first, and ErrReservationEnded after a Cancel or a Commit of another n. A
// retry with the same n, after a lost reply, is applied once.
func (r *Reservation) CommitN(ctx context.Context, n uint64) error {
	if n == 0 || n > r.amount() {
		return fmt.Errorf("%w: commit %d of reservation %s of %d", ErrInvalidAmount, n, r.d.ID, r.amount())
	}
	return r.commit(ctx, n)
}

func (r *Reservation) commit(ctx context.Context, n uint64) error {
	if !r.OK() {
		return fmt.Errorf("%w: %s was denied: there is nothing to commit", ErrReservationEnded, r.d.ID)
	}
	res, err := r.send(ctx, r.ending(roleCommit, n))
	if err != nil {
		return err
	}
	s := res[0].Status
	switch status.ClassifyEnd(s) {
	case status.EndedNow:
		if status.Classify(res[len(res)-1].Status) == status.Linked {
			// The void existed (conn folds exists into created), so the
			// chain did: this commit's retry, or a commit of another n.
			return r.committedBefore(ctx, n)
		}
		return nil
	case status.EndPostedYet:
		if r.pay == nil {
			return nil // SetLimit lowering the limit posted it: kept for good
		}
	case status.EndExpired:
		return fmt.Errorf("%w: %s", ErrReservationExpired, r.d.ID)
	case status.EndVoidedYet:
		return fmt.Errorf("%w: %s", ErrReservationCancelled, r.d.ID)
	case status.EndNoHold:
		return fmt.Errorf("%w: %s", ErrUnknownReservation, r.d.ID)
	}
	return fmt.Errorf("ledger: commit reservation %s: %w", r.d.ID, chainError(res))
}

// committedBefore checks a commit of n whose void was applied before: by
// this commit (its reply lost), or by one of another n.
func (r *Reservation) committedBefore(ctx context.Context, n uint64) error {
	ts, err := r.c.conn.LookupTransfers(ctx, []tb.Uint128{keptID(fromTB(r.t.PendingID)).tb()})
	if err != nil || len(ts) == 0 {
		return err
	}
	if kept, _ := u64(ts[0].Amount); kept != n {
		return fmt.Errorf("%w: %s was committed with %d, not %d", ErrReservationEnded, r.d.ID, kept, n)
	}
	return nil
}

// send sends chain, each hold's end teaching r's user's view, and returns
// its results.
func (r *Reservation) send(ctx context.Context, chain []tb.Transfer) ([]tb.CreateTransferResult, error) {
	steps := make([]step, len(chain))
	for i, t := range chain {
		steps[i].T = t
		if t.Ledger == r.t.Ledger {
			steps[i].User = r.u
		}
	}
	return r.c.send(ctx, &opSpec{}, steps)
}

// ending is the chain that ends the reservation in role, every ID derived
// from the hold so that a retry is applied once:
//   - roleCancel: void the hold (and an authorization's payment);
//   - roleCommit: void the hold and hold n of its units again until the
//     hold would have expired (regrant, as a lease gives back what it did
//     not use), and post n of an authorization's payment, linked, so that
//     all happens or none.
func (r *Reservation) ending(role byte, n uint64) []tb.Transfer {
	hold := fromTB(r.t.PendingID)
	t := r.t
	t.ID, t.PendingID, t.Timeout = r.t.PendingID, tb.Uint128{}, r.rest()
	var chain []tb.Transfer
	if role == roleCancel {
		chain = regrant(t, 0, endID(roleCancel, hold), ID{}, 0)
	} else {
		chain = regrant(t, n, endID(roleCommit, hold), keptID(hold), codeKept)
	}
	if r.pay == nil {
		return chain
	}
	last := &chain[len(chain)-1]
	last.Flags |= tb.TransferFlags{Linked: true}.ToUint16()
	payEnd := tb.Transfer{
		ID:              endID(role, fromTB(r.pay.ID)).tb(),
		PendingID:       r.pay.ID,
		DebitAccountID:  r.pay.DebitAccountID,
		CreditAccountID: r.pay.CreditAccountID,
		Ledger:          r.pay.Ledger,
		Code:            r.pay.Code,
		Flags:           tb.TransferFlags{VoidPendingTransfer: true}.ToUint16(),
	}
	if role == roleCommit {
		payEnd.Amount = tb.ToUint128(n)
		payEnd.Flags = tb.TransferFlags{PostPendingTransfer: true}.ToUint16()
	}
	return append(chain, payEnd)
}

// rest is the timeout that keeps units from now until the hold would have
// expired: whole seconds rounded up, and one more on a remote cluster,
// whose clock this Client estimates from below; the hold's own timeout
// when the hold's time is not known.
func (r *Reservation) rest() uint32 {
	if r.heldAt == 0 {
		return r.t.Timeout
	}
	// Expired, or about to, is 1: the void says which.
	return r.c.secondsUntil(r.heldAt+uint64(r.t.Timeout)*uint64(time.Second), r.t.Timeout)
}

// chainError is the error of the first event of a failed chain that failed
// for its own reason.
func chainError(res []tb.CreateTransferResult) error {
	for i, x := range res {
		if out := status.Classify(x.Status); out != status.Linked && out != status.Admitted {
			return transferStatusError(i, x.Status)
		}
	}
	return transferStatusError(0, res[0].Status)
}

// transferExists reports whether a transfer with ID id exists.
func (c *Client) transferExists(ctx context.Context, id ID) (bool, error) {
	ts, err := c.conn.LookupTransfers(ctx, []tb.Uint128{id.tb()})
	return len(ts) > 0, err
}

// Amount is how many units the reservation holds (or held, once ended):
// the most a Commit may keep.
func (r *Reservation) Amount() uint64 { return r.amount() }

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
	if len(ts) == 0 || !ts[0].TransferFlags().Pending || (ts[0].Code != codeReserve && ts[0].Code != codePayHold) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownReservation, hold)
	}
	t := ts[0]
	r, err := c.Resource(ctx, t.Ledger)
	if err != nil {
		return nil, err
	}
	var pay *tb.Transfer
	if t.Code == codePayHold {
		// An authorization's hold, if its payment is pending; a payment's
		// (Pay), which no call may end, if not.
		if pay, err = c.authorized(ctx, r, t.ID); err != nil {
			return nil, err
		}
		if pay == nil {
			return nil, fmt.Errorf("%w: %s holds the limit of a payment made, not of an authorization", ErrUnknownReservation, hold)
		}
	}
	key, err := c.keyOf(ctx, r, fromTB(t.DebitAccountID))
	if err != nil {
		return nil, err
	}
	return c.reservationOf(r, key, t, pay), nil
}

// reservationOf is the reservation whose hold is t, a pending transfer on
// r of user key ("" when not known: the Client's view of the user is then
// not told of its end) and, for an authorization, its pending payment pay.
func (c *Client) reservationOf(r Resource, key string, t tb.Transfer, pay *tb.Transfer) *Reservation {
	id := fromTB(t.ID)
	if t.UserData128 != (tb.Uint128{}) {
		id = fromTB(t.UserData128) // the request's name, when not the hold's
	}
	rv := &Reservation{c: c, res: r, d: Decision{Allowed: true, Reason: Admitted, ID: id, Timestamp: t.Timestamp}, heldAt: t.Timestamp, pay: pay}
	if key != "" {
		rv.u = c.users.get(r, key)
	}
	rv.t = tb.Transfer{
		DebitAccountID:  t.DebitAccountID,
		CreditAccountID: t.CreditAccountID,
		Amount:          t.Amount,
		PendingID:       t.ID,
		Timeout:         t.Timeout,
		UserData64:      t.UserData64,
		Ledger:          t.Ledger,
		Code:            t.Code,
	}
	return rv
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
