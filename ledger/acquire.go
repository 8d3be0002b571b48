package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Request asks for Amount units of a resource for User.
type Request struct {
	// User is the user's key, under the key rule of NormalizeKey: valid
	// UTF-8 of 1 to MaxKeyLen bytes, no control characters, no white
	// space at either end.
	User string
	// Amount is how many units to take: 1 per request, the size in bytes
	// for bandwidth, the amount in the currency's smallest unit for money.
	Amount uint64
	// ID names the request, as an idempotency key does: every call with
	// the same ID is the same request, which is admitted at most once.
	//   - An admission under an ID is final: a later call with the ID
	//     answers it again (Allowed, and the same ID), and takes nothing
	//     more, even when the first call's answer was lost or it is still
	//     on its way to the cluster.
	//   - A denial is not: a later call with the ID decides again, so that a
	//     request denied for want of units (or funds) can be made again
	//     under the same ID once RetryAfter has passed, and be admitted.
	//   - A call whose answer was lost (ErrUnavailable) is safe to repeat
	//     with the ID: whatever happened to it, the request counts once.
	// Leave it zero and the Client names the request itself: the Decision's
	// ID (or AttemptID of the error) is that name. KeyID derives an ID from
	// a business key, such as an order number. An ID names one request: used
	// again with another user or amount (or, for a Payment, payee) it is
	// ErrIDReused. A first call
	// under an ID costs what any decision costs; a call after a denial under
	// the same ID costs one more transfer, stored with it.
	ID ID
	// Ref is stored with the transfer (user_data_64) for the audit trail,
	// e.g. a payment or request number.
	Ref uint64
	// Limit, when not 0, is the limit the caller wants the user to have
	// (its plan): a lazy user is provisioned with it instead of the
	// resource's default, and a user whose limit differs is given it
	// (SetLimit) before the decision. The change takes effect with the
	// user's first decision after it, once this Client knows the user's
	// limit (it reads it first if it does not; a lazy user it has not seen
	// is not read: its first decision provisions it with the plan, or, if
	// it existed with another limit, is decided under that one, and the
	// plan is given it before the next); a lower limit never lets a
	// window hold more than the old limit (see SetLimit). Processes that
	// decide for the same user must agree on its plan.
	Limit uint64
}

// Reason says why a decision did not admit.
type Reason uint8

const (
	// Undecided: no decision was made (the zero Reason, as in the Decision
	// a call returns with its error).
	Undecided Reason = iota
	// Admitted: nothing was refused.
	Admitted
	// LimitExceeded: the limit had fewer units left than asked for.
	LimitExceeded
	// InsufficientFunds: a payment's source account lacked the money.
	InsufficientFunds
	// Unavailable: the cluster did not answer; the Client's OnUnavailable decided.
	Unavailable
)

// String returns "undecided", "admitted", "limit exceeded", "insufficient funds" or "unavailable".
func (r Reason) String() string {
	switch r {
	case Undecided:
		return "undecided"
	case Admitted:
		return "admitted"
	case LimitExceeded:
		return "limit exceeded"
	case InsufficientFunds:
		return "insufficient funds"
	case Unavailable:
		return "unavailable"
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Decision is the answer to a request. A denial is a Decision with Allowed
// false, not an error.
//
// Allowed is always exact: TigerBeetle's balance check decided it (or, for
// a user known to be drained, the Client did, on the cluster's word of the
// last second). The other numbers come from the Client's view of the user,
// not from a read per decision: the limit, the holds this Client took and
// the instants they return, and what its last read of the account showed
// beyond those. In one process that is the only one taking a user's units,
// they are exact. When other processes take units of the same user, what
// they took since this Client last read the user is missing (Remaining may
// be too high) and what they hold is counted until the latest instant it
// can return (RetryAfter and ResetAfter may be late); the Client reads a
// user in use again every second or so (at most one account per 16
// decisions), and at once when the cluster contradicts its view. Use
// WithExactDecisions, or Inspect, for numbers exact across processes.
type Decision struct {
	// Allowed reports whether the units were taken.
	Allowed bool
	// Reason says why not, when Allowed is false.
	Reason Reason
	// Limit is the user's limit: units per window. For a user this Client
	// neither provisioned nor read yet it is the resource's default until
	// the first read.
	Limit uint64
	// Remaining is how many units were left just after the decision (a
	// snapshot: concurrent requests may have taken some since).
	Remaining uint64
	// RetryAfter is, when denied, how long until enough units will have
	// returned for the same amount, from the instants the Client knows they
	// return; 0 when allowed; negative when the amount exceeds the limit and
	// can never be admitted.
	RetryAfter time.Duration
	// ResetAfter is how long until every unit in flight has returned and the
	// whole limit is available again.
	ResetAfter time.Duration
	// ID names the request (see Request.ID): the caller's, or the one the
	// Client gave it, which is the transfer that took the units. It is
	// zero for a denial made without asking the cluster.
	ID ID
	// Timestamp is the cluster time of the decision, in nanoseconds since
	// the Unix epoch (0 when Unavailable; this Client's estimate of the
	// cluster's clock when decided without asking it).
	Timestamp uint64
}

// ResetIn is how long until quota returns, as rate limit answers say it
// (Envoy's duration_until_reset, the RateLimit field's t): for a denial by
// the limit, until enough units for the same amount will have returned
// (RetryAfter), unless they never can; otherwise until every unit in
// flight has (ResetAfter). Units return one by one, so some may come back
// sooner: it is an upper bound.
func (d Decision) ResetIn() time.Duration {
	if d.Reason == LimitExceeded && d.RetryAfter >= 0 {
		return d.RetryAfter
	}
	return d.ResetAfter
}

// soleDecision returns ds[0], or a zero Decision: the Decision of a call
// of one part, or none beside its error.
func soleDecision(ds []Decision) Decision {
	if len(ds) == 0 {
		return Decision{}
	}
	return ds[0]
}

// attemptError carries the ID of an attempt whose answer was lost.
type attemptError struct {
	id  ID
	err error
}

func (e *attemptError) Error() string { return fmt.Sprintf("%v (attempt %s)", e.err, e.id) }
func (e *attemptError) Unwrap() error { return e.err }

// AttemptID returns the ID of the attempt an error from Acquire or Pay was
// about, so that the same attempt can be retried without counting twice.
func AttemptID(err error) (ID, bool) {
	var ae *attemptError
	if errors.As(err, &ae) {
		return ae.id, true
	}
	return ID{}, false
}

// Acquire takes req.Amount units of r for req.User: one pending transfer
// from the user to the operator that expires after r.Window and gives the
// units back: the decision does not post or void it (Reset, SetLimit's
// lowering and leases' give-backs may, later). If the user has fewer units
// left, the decision denies and nothing is taken.
//
// An unknown user is provisioned with r.DefaultLimit within the call when r
// is Lazy (one request more, shared by the calls of other unknown users in
// flight: see Stats), and is ErrUnknownUser otherwise. When the cluster does not answer
// in time, the Client's OnUnavailable decides (see WithUnavailable).
func (c *Client) Acquire(ctx context.Context, r Resource, req Request) (Decision, error) {
	if err := validPart(r, &req); err != nil {
		return Decision{}, err
	}
	start := c.observeStart()
	parts := []Part{{Resource: r, Request: req}}
	var d Decision
	var err error
	if c.leases != nil && req.ID.IsZero() {
		d, err = c.acquireLeased(ctx, r, req)
	} else {
		var buf [1]Decision // the decision needs no allocation
		var a answer
		a, err = c.acquire(ctx, parts, true, codeAcquire, buf[:0])
		d = soleDecision(a.ds)
	}
	c.observe(start, parts, []Decision{d}, err)
	return d, err
}

// Charged is the answer to Charge: its Decision (Allowed, with Remaining
// what is left after it) and how many units it took.
type Charged struct {
	Decision
	// Taken is req.Amount, or what remained when less: what the record
	// shows. A caller that must not forget the rest (a debt to charge
	// before it admits more) keeps req.Amount − Taken.
	Taken uint64
}

// Charge records req.Amount units of r for req.User as a cost already
// incurred, such as the tokens of an LLM call known once it answered: it is
// never denied for the limit. When fewer units remain, it takes what remains
// (TigerBeetle's balancing debit), so that later decisions are denied until
// units return; it never takes more than the limit, so the user's window
// never holds more than the limit, and nothing is lowered for good: the
// units return one window later, as every decision's do.
//
// The Decision is Allowed, and Remaining is what is left after it (0 when
// the charge took all that remained). req.ID makes a charge exactly once,
// as for Acquire. A charge that left nothing reads what it took from the
// cluster: one request more, only then.
func (c *Client) Charge(ctx context.Context, r Resource, req Request) (Charged, error) {
	return c.ChargeUntil(ctx, r, req, time.Time{})
}

// ChargeUntil is Charge for a cost incurred earlier, which the record could
// not hold then: its units return at until (rounded up to a whole second,
// one more on a remote cluster, and at most one window from now), not one
// window from now. An until that has passed charges nothing, and says all
// was taken: those units would have returned already. Charge is ChargeUntil
// with a zero until.
func (c *Client) ChargeUntil(ctx context.Context, r Resource, req Request, until time.Time) (Charged, error) {
	if err := validPart(r, &req); err != nil {
		return Charged{}, err
	}
	if !until.IsZero() && c.clusterNow() >= uint64(until.UnixNano()) {
		return Charged{Decision: Decision{Allowed: true, Reason: Admitted}, Taken: req.Amount}, nil
	}
	start := c.observeStart()
	parts := []Part{{Resource: r, Request: req}}
	u := c.users.get(r, req.User)
	if req.Limit != 0 {
		if err := c.plan(ctx, u, &parts[0]); err != nil {
			return Charged{}, err
		}
	}
	// What a charge takes depends on what remained: a view that does not
	// know it reads the account after the charge, to answer Remaining.
	u.lock()
	known := u.v.complete()
	u.mu.Unlock()
	t := newHold(r, u.id, req.Amount, tb.TransferFlags{BalancingDebit: true})
	if !until.IsZero() {
		t.Timeout = c.secondsUntil(uint64(until.UnixNano()), t.Timeout)
	}
	if !req.ID.IsZero() {
		t.ID = req.ID.tb()
	}
	t.UserData64 = req.Ref
	steps := [1]step{{t: t, u: u, decide: true}}
	var buf [1]Decision
	a, err := c.decide(ctx, &opSpec{key: req.ID, exact: c.exact || !known}, steps[:], parts, buf[:0])
	d, hold := soleDecision(a.ds), a.hold
	c.observe(start, parts, []Decision{d}, err)
	out := Charged{Decision: d, Taken: req.Amount}
	if err != nil || d.Remaining > 0 {
		return out, err
	}
	ts, err := c.conn.LookupTransfers(ctx, []tb.Uint128{hold})
	if err != nil {
		return out, &attemptError{id: d.ID, err: err} // recorded: a retry under its ID is safe
	}
	if len(ts) == 1 {
		out.Taken, _ = u64(ts[0].Amount)
	}
	return out, nil
}

// secondsUntil is the timeout that holds units from now until the cluster
// time until: whole seconds rounded up, one more on a remote cluster (whose
// clock this Client estimates from below), from 1 to most.
func (c *Client) secondsUntil(until uint64, most uint32) uint32 {
	now := c.clusterNow()
	if now >= until {
		return 1
	}
	secs := (until - now + uint64(time.Second) - 1) / uint64(time.Second)
	if !c.conn.InProcess() {
		secs++
	}
	return uint32(max(1, min(secs, uint64(most))))
}

// validPart checks r and req, and puts req.User in its normal form.
func validPart(r Resource, req *Request) error {
	if err := r.Validate(); err != nil {
		return err
	}
	key, err := NormalizeKey(req.User)
	if err != nil {
		return err
	}
	req.User = key
	return validAmount(req.Amount)
}

// newHold returns a new pending transfer that takes amount units of r from
// account uid for one window, with the extra flags given.
func newHold(r Resource, uid ID, amount uint64, flags tb.TransferFlags) tb.Transfer {
	secs, _ := WindowSeconds(r.Window)
	flags.Pending = true
	return tb.Transfer{
		ID:              NewID().tb(),
		DebitAccountID:  uid.tb(),
		CreditAccountID: OperatorID(r.Ledger).tb(),
		Amount:          tb.ToUint128(amount),
		Timeout:         secs,
		Ledger:          r.Ledger,
		Code:            codeAcquire,
		Flags:           flags.ToUint16(),
	}
}

// Part is one part of an AcquireAll: units of one resource for one user,
// which become one hold (a pending transfer) of the chain if it admits.
type Part struct {
	Resource Resource
	Request  Request
}

// AcquireAll takes every part or none: one linked chain of pending
// transfers (holds), across ledgers, that TigerBeetle applies
// all-or-nothing. Use it to apply several windows to one request (10 per
// second and 100 per minute) or several resources (requests and bytes). It
// returns one Decision per part in order, all allowed or all denied; a
// denied part's Reason and RetryAfter say which limit refused (parts that
// would have fitted say Admitted).
func (c *Client) AcquireAll(ctx context.Context, parts []Part) ([]Decision, error) {
	parts, err := validChain(parts)
	if err != nil {
		return nil, err
	}
	start := c.observeStart()
	a, err := c.acquire(ctx, parts, true, codeAcquire, nil)
	c.observe(start, parts, a.ds, err)
	return a.ds, err
}

// validChain checks the parts of a chain, and returns a copy of them with
// their users' keys in normal form.
func validChain(parts []Part) ([]Part, error) {
	if len(parts) == 0 || len(parts) > BatchMax {
		return nil, fmt.Errorf("%w: %d holds in one chain", ErrTooMany, len(parts))
	}
	parts = slices.Clone(parts)
	for i := range parts {
		if err := validPart(parts[i].Resource, &parts[i].Request); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// acquire decides valid parts as one chain. A chain that retries no
// caller's attempt is denied without I/O when a user's view allows it;
// merge says whether coalescing may merge a single part with others (not
// for a Reservation, whose transfer is ended on its own); code is the
// holds' (codeAcquire, or codeReserve for a Reservation's: a chain's
// answer keeps the chain). The first part's Request.ID names the whole request
// (see Request.ID). Decisions are appended to dst, whose room the caller
// may provide.
func (c *Client) acquire(ctx context.Context, parts []Part, merge bool, code uint16, dst []Decision) (answer, error) {
	// Parts are large: the loops take them by reference.
	for i := 1; i < len(parts); i++ {
		if !parts[i].Request.ID.IsZero() {
			return answer{}, fmt.Errorf("%w: only the first hold of a chain takes an ID, which names the whole chain", ErrInvalidID)
		}
	}
	key := parts[0].Request.ID
	us := make([]*user, len(parts))
	for i := range parts {
		h := &parts[i]
		us[i] = c.users.get(h.Resource, h.Request.User)
		if h.Request.Limit != 0 {
			if err := c.plan(ctx, us[i], h); err != nil {
				return answer{}, err
			}
		}
	}
	seen := false
	if key.IsZero() {
		ds, denied, provisioned := c.denyLocally(parts, us, dst)
		if denied {
			return answer{ds: ds}, nil
		}
		seen = provisioned
	}
	var one [1]step
	steps := one[:]
	if len(parts) > 1 {
		steps = make([]step, len(parts))
	}
	for i := range parts {
		h := &parts[i]
		t := newHold(h.Resource, us[i].id, h.Request.Amount, tb.TransferFlags{Linked: i < len(parts)-1})
		t.Code = code
		switch {
		case i == 0 && !key.IsZero():
			t.ID = key.tb() // the first hold is named by the request's ID...
		case i > 0:
			t.UserData128 = steps[0].t.ID // ...and the others carry its name
		}
		t.UserData64 = h.Request.Ref
		steps[i] = step{t: t, u: us[i], decide: true}
	}
	spec := opSpec{key: key, seen: seen, exact: c.exact, keep: code == codeReserve && len(parts) > 1,
		merge: merge && len(parts) == 1 && key.IsZero() && parts[0].Request.Ref == 0 && !c.exact}
	return c.decide(ctx, &spec, steps, parts, dst)
}
