package ledger

import (
	"context"
	"fmt"
	"slices"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

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
	known := u.v.Complete()
	u.mu.Unlock()
	t := newHold(r, u.id, req.Amount, tb.TransferFlags{BalancingDebit: true})
	if !until.IsZero() {
		t.Timeout = c.secondsUntil(uint64(until.UnixNano()), t.Timeout)
	}
	if !req.ID.IsZero() {
		t.ID = req.ID.tb()
	}
	t.UserData64 = req.Ref
	steps := [1]step{{T: t, User: u, Decide: true}}
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
		steps[i] = step{T: newHold(h.Resource, us[i].id, h.Request.Amount, tb.TransferFlags{Linked: i < len(parts)-1}), User: us[i], Decide: true}
		t := &steps[i].T // built in place: a transfer is large
		t.Code = code
		switch {
		case i == 0 && !key.IsZero():
			t.ID = key.tb() // the first hold is named by the request's ID...
		case i > 0:
			t.UserData128 = steps[0].T.ID // ...and the others carry its name
		}
		t.UserData64 = h.Request.Ref
	}
	spec := opSpec{key: key, seen: seen, exact: c.exact, keep: code == codeReserve && len(parts) > 1,
		merge: merge && len(parts) == 1 && key.IsZero() && parts[0].Request.Ref == 0 && !c.exact}
	return c.decide(ctx, &spec, steps, parts, dst)
}
