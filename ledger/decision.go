package ledger

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/tblimit/tblimit/ledger/internal/view"
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

// Part is one part of an AcquireAll: units of one resource for one user,
// which become one hold (a pending transfer) of the chain if it admits.
type Part struct {
	Resource Resource
	Request  Request
}

// decisionOf is the Decision report r gives at cluster time t, from which
// its durations count and which dates it unless r.Stamp does; id names the
// request (see Decision.ID), zero when nothing does. Every Decision a view
// describes is made here (see view.Report).
func decisionOf(r view.Report, allowed bool, reason Reason, id ID, t uint64) Decision {
	d := Decision{Allowed: allowed, Reason: reason, ID: id, Timestamp: cmp.Or(r.Stamp, t), Limit: r.Limit,
		Remaining: r.Remaining, ResetAfter: r.ResetAfter(t)}
	if reason == LimitExceeded {
		d.RetryAfter = r.RetryAfter(t)
	}
	return d
}

// verdict is the Decision v gives amount units at t without taking them:
// LimitExceeded when they do not fit, else Admitted, and Allowed if fits
// says that units that fit are reported so (a Check), not when another
// part of their chain was denied. The user's mutex is held.
func verdict(v *view.View, amount, t uint64, fits bool) Decision {
	if v.Available(t) < amount {
		return localDenial(v, amount, t)
	}
	return decisionOf(v.Report(t), fits, Admitted, ID{}, t)
}
