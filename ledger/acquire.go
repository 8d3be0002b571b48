package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Request asks for Amount units of a resource for User.
type Request struct {
	// User is the user's key: any non-empty string up to MaxKeyLen bytes.
	User string
	// Amount is how many units to take: 1 per request, the size in bytes
	// for bandwidth, the amount in the currency's smallest unit for money.
	Amount uint64
	// ID identifies this attempt. Leave it zero for a new attempt; to
	// retry an attempt whose answer was lost (ErrUnavailable), send it
	// again with the ID of the Decision or of the error (see AttemptID),
	// so that it is not counted twice.
	ID ID
	// Ref is stored with the transfer (user_data_64) for the audit trail,
	// e.g. a payment or request number.
	Ref uint64
}

// Reason says why a decision did not admit.
type Reason uint8

const (
	// Admitted: nothing was refused.
	Admitted Reason = iota
	// LimitExceeded: the limit had fewer units left than asked for.
	LimitExceeded
	// InsufficientFunds: a payment's source account lacked the money.
	InsufficientFunds
	// Unavailable: the cluster did not answer; the Client's Policy decided.
	Unavailable
)

// String returns "admitted", "limit exceeded", "insufficient funds" or "unavailable".
func (r Reason) String() string {
	switch r {
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
type Decision struct {
	// Allowed reports whether the units were taken.
	Allowed bool
	// Reason says why not, when Allowed is false.
	Reason Reason
	// Limit is the user's limit: units per window.
	Limit uint64
	// Remaining is how many units were left just after the decision (a
	// snapshot: concurrent requests may have taken some since).
	Remaining uint64
	// RetryAfter is, when denied, how long until enough units will have
	// returned for the same amount (an estimate from the cluster timestamps
	// of the units in flight); 0 when allowed; negative when the amount
	// exceeds the limit and can never be admitted.
	RetryAfter time.Duration
	// ResetAfter is how long until every unit in flight has returned and the
	// whole limit is available again.
	ResetAfter time.Duration
	// ID is the transfer that took the units (when allowed) or the attempt
	// (when denied): send it again in Request.ID to retry the same attempt.
	ID ID
	// Timestamp is the cluster time of the decision, in nanoseconds since
	// the Unix epoch (0 when Unavailable).
	Timestamp uint64
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

func validAmount(amount uint64) error {
	if amount == 0 {
		return fmt.Errorf("%w: 0 units", ErrInvalidAmount)
	}
	if amount > math.MaxInt64 {
		return fmt.Errorf("%w: %d units is more than %d", ErrInvalidAmount, amount, uint64(math.MaxInt64))
	}
	return nil
}

// Acquire takes req.Amount units of r for req.User: one pending transfer
// from the user to the operator that expires after r.Window and gives the
// units back. It is never posted or voided. If the user has fewer units left,
// the decision denies and nothing is taken.
//
// An unknown user is provisioned with r.DefaultLimit within the call when r
// is Lazy, and is ErrUnknownUser otherwise. When the cluster does not answer
// in time, the Client's Policy decides (see WithUnavailable).
func (c *Client) Acquire(ctx context.Context, r Resource, req Request) (Decision, error) {
	if (c.leases != nil || c.coalesce != nil) && req.ID.IsZero() {
		if err := validHold(r, req); err != nil {
			return Decision{}, err
		}
		if c.leases != nil {
			return c.acquireLeased(ctx, r, req)
		}
		return c.acquireCoalesced(ctx, r, req)
	}
	ds, err := c.AcquireAll(ctx, []Hold{{Resource: r, Request: req}})
	if len(ds) == 0 {
		return Decision{}, err
	}
	return ds[0], err
}

func validHold(r Resource, req Request) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if err := validKey(req.User); err != nil {
		return err
	}
	return validAmount(req.Amount)
}

// hold returns a new pending transfer that takes amount units of r from
// account uid for one window, with the extra flags given.
func hold(r Resource, uid ID, amount uint64, flags tb.TransferFlags) tb.Transfer {
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

// missing explains why user key has no account on r: there is no such
// resource, or no such user.
func (c *Client) missing(ctx context.Context, r Resource, key string) error {
	if _, err := c.Resource(ctx, r.Ledger); err != nil {
		return err
	}
	return fmt.Errorf("%w: %q on %s", ErrUnknownUser, key, r.Name)
}

// Hold is one part of an AcquireAll: units of one resource for one user.
type Hold struct {
	Resource Resource
	Request  Request
}

// AcquireAll takes every hold or none: one linked chain of pending
// transfers, across ledgers, that TigerBeetle applies all-or-nothing. Use it
// to apply several windows to one request (10 per second and 100 per minute)
// or several resources (requests and bytes). It returns one Decision per hold
// in order, all allowed or all denied; a denied hold's Reason and RetryAfter
// say which limit refused (holds that would have fitted say Admitted).
func (c *Client) AcquireAll(ctx context.Context, holds []Hold) ([]Decision, error) {
	if len(holds) == 0 || len(holds) > BatchMax {
		return nil, fmt.Errorf("%w: %d holds in one chain", ErrTooMany, len(holds))
	}
	ids := make([]ID, len(holds))
	for i, h := range holds {
		if err := validHold(h.Resource, h.Request); err != nil {
			return nil, err
		}
		ids[i] = UserID(h.Resource.Ledger, h.Request.User)
	}
	if len(holds) == 1 && holds[0].Request.ID.IsZero() {
		if d, ok := c.drain.deny(ids[0], holds[0].Request.Amount, uint64(c.now().UnixNano())); ok {
			return []Decision{d}, nil
		}
	}
	chain := make([]tb.Transfer, len(holds))
	for i, h := range holds {
		chain[i] = hold(h.Resource, ids[i], h.Request.Amount, tb.TransferFlags{Linked: i < len(holds)-1})
		if !h.Request.ID.IsZero() {
			chain[i].ID = h.Request.ID.tb()
		}
		chain[i].UserData64 = h.Request.Ref
	}
	for provisioned := false; ; provisioned = true {
		res, accounts, err := c.submit(ctx, chain, ids)
		if err != nil {
			return c.unavailableDecisions(chain, err)
		}
		ds := make([]Decision, len(chain))
		var lazy []int
		failed := false
		for i, s := range res {
			ds[i] = Decision{ID: fromTB(chain[i].ID), Timestamp: s.Timestamp}
			switch s.Status {
			case tb.TransferCreated:
				ds[i].Allowed = true
			case tb.TransferLinkedEventFailed:
			case tb.TransferExceedsCredits, tb.TransferIDAlreadyFailed:
				ds[i].Reason = LimitExceeded
				failed = true
			case tb.TransferDebitAccountNotFound:
				// Handled below for every hold of the chain at once.
			case tb.TransferCreditAccountNotFound:
				return nil, fmt.Errorf("%w: no resource on ledger %d", ErrUnknownResource, holds[i].Resource.Ledger)
			default:
				if strings.HasPrefix(s.Status.String(), "TransferExistsWith") {
					return nil, fmt.Errorf("%w: %s was already used for a different request (%s)", ErrInvalidID, fromTB(chain[i].ID), s.Status)
				}
				return nil, transferStatusError(i, s.Status)
			}
		}
		for i, a := range accounts {
			if !fromTB(a.ID).IsZero() {
				continue
			}
			if !holds[i].Resource.Lazy || provisioned {
				return nil, c.missing(ctx, holds[i].Resource, holds[i].Request.User)
			}
			lazy = append(lazy, i)
		}
		if failed {
			for i := range ds {
				ds[i].Allowed = false
			}
		}
		if len(lazy) == 0 {
			if err := c.explain(ctx, holds, ids, accounts, ds); err != nil {
				return ds, err
			}
			if !failed || provisioned {
				return ds, nil
			}
			// A lazy user whose account was created but never credited (a
			// crash between the two steps) would be denied for ever:
			// provisioning again is safe, since its credit has a fixed ID.
			for i, d := range ds {
				if holds[i].Resource.Lazy && d.Limit == 0 && d.Reason == LimitExceeded {
					lazy = append(lazy, i)
				}
			}
			if len(lazy) == 0 {
				return ds, nil
			}
		}
		if err := c.provisionLazy(ctx, holds, lazy); err != nil {
			return nil, err
		}
		for i := range chain {
			chain[i].ID = NewID().tb() // a new attempt: TigerBeetle spent the failed IDs
		}
	}
}

// provisionLazy provisions the users of the lazy holds listed in idx with
// their resource's default limit.
func (c *Client) provisionLazy(ctx context.Context, holds []Hold, idx []int) error {
	for _, i := range idx {
		h := holds[i]
		if err := c.provision(ctx, h.Resource, []UserLimit{{Key: h.Request.User, Limit: h.Resource.DefaultLimit}}, false); err != nil {
			return err
		}
	}
	return nil
}

// explain fills in limits, remaining units and, for denials, when enough
// units return, from the accounts (ids) as they were just after the decision.
func (c *Client) explain(ctx context.Context, holds []Hold, ids []ID, accounts []tb.Account, ds []Decision) error {
	for i, h := range holds {
		a := accounts[i]
		if fromTB(a.ID).IsZero() {
			continue
		}
		b, err := balanceOf(a)
		if err != nil {
			return err
		}
		d := &ds[i]
		d.Limit, d.Remaining = b.Limit, b.Available
		if d.Allowed {
			d.ResetAfter = h.Resource.Window
			continue
		}
		amount := h.Request.Amount
		if d.Reason == Admitted && amount > b.Available {
			d.Reason = LimitExceeded // a later link of a chain that failed earlier
		}
		now := d.Timestamp
		var flights []flight
		if d.Reason == LimitExceeded {
			switch {
			case amount > b.Limit:
				d.RetryAfter = -1
			case amount > b.Available:
				flights, err = c.inFlight(ctx, ids[i], h.Resource.Window, now, amount-b.Available, false)
				if err != nil {
					return err
				}
				d.RetryAfter = max(releaseAfter(flights, now, amount-b.Available), 0)
			}
		}
		if b.InFlight > 0 {
			last, err := c.lastExpiry(ctx, ids[i], h.Resource.Window, now)
			if err != nil {
				return err
			}
			d.ResetAfter = time.Duration(last - min(last, now))
			if b.Available == 0 && len(holds) == 1 {
				c.drain.learn(ids[i], b.Limit, flights, last, now, uint64(c.now().UnixNano()), c.denyCacheBound())
			}
		}
	}
	return nil
}

// lastExpiry returns the cluster time at which the last unit now in flight
// out of uid returns (now if none is), reading its transfers from the
// newest. A post or void is newer than the hold it ends, so it is read
// first and the hold is skipped. The scan stops at the first transfer that
// could not return after what was found, if no timeout is longer than
// window (callers that must see a remote re-hold's extra second pass
// maxTimeout); after a few pages it gives an upper estimate instead.
func (c *Client) lastExpiry(ctx context.Context, uid ID, window time.Duration, now uint64) (uint64, error) {
	f := tb.AccountFilter{
		AccountID: uid.tb(),
		Flags:     tb.AccountFilterFlags{Debits: true, Reversed: true}.ToUint32(),
	}
	longest := uint64(window)
	last := now
	ended := map[tb.Uint128]bool{}
	for pages, want := 0, uint32(16); ; pages, want = pages+1, min(want*4, BatchMax) {
		if pages == 4 {
			// Whatever is older than the last transfer read returns
			// before that one's timestamp plus the longest timeout.
			return max(last, f.TimestampMax+1+longest), nil
		}
		got, err := page(ctx, c, &f, &f.Limit, want, c.tb.GetAccountTransfers)
		if err != nil {
			return 0, err
		}
		for _, t := range got {
			if t.Timestamp+longest <= last {
				return last, nil
			}
			flags := t.TransferFlags()
			switch {
			case flags.PostPendingTransfer || flags.VoidPendingTransfer:
				ended[t.PendingID] = true
			case flags.Pending && !ended[t.ID]:
				last = max(last, t.Timestamp+uint64(t.Timeout)*uint64(time.Second))
			}
		}
		if len(got) < int(f.Limit) {
			return last, nil
		}
		f.TimestampMax = got[len(got)-1].Timestamp - 1
	}
}

// unavailableDecisions applies the Client's Policy to a chain whose answer
// did not come.
func (c *Client) unavailableDecisions(chain []tb.Transfer, err error) ([]Decision, error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	ds := make([]Decision, len(chain))
	for i := range ds {
		ds[i] = Decision{Allowed: c.unavailable == FailOpen, Reason: Unavailable, ID: fromTB(chain[i].ID)}
	}
	if c.unavailable == ReturnError {
		return ds, &attemptError{id: fromTB(chain[0].ID), err: err}
	}
	return ds, nil
}
