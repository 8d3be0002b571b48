package ledger

import (
	"context"
	"fmt"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Payment moves Amount of a money resource's currency from one user to
// another, under From's limit.
type Payment struct {
	// From pays; its limit on the resource is charged.
	From string
	// To is paid: a user with an account on the currency ledger.
	To string
	// Amount is in the currency's smallest unit.
	Amount uint64
	// ID identifies the attempt, as in Request.
	ID ID
	// Ref is stored with both transfers (user_data_64) for the audit trail.
	Ref uint64
}

// Pay makes a payment under a money limit with one linked pair of transfers:
// a pending reservation of Amount on r's limit ledger that expires after
// r.Window, linked to the payment itself on r's currency ledger. TigerBeetle
// applies both or neither: over the limit (Reason LimitExceeded) or short of
// funds (Reason InsufficientFunds), nothing at all is written to either
// ledger. A payment is never made when the cluster is unavailable, whatever
// the Client's Policy.
func (c *Client) Pay(ctx context.Context, r Resource, p Payment) (Decision, error) {
	if err := r.Validate(); err != nil {
		return Decision{}, err
	}
	if r.Kind != Money {
		return Decision{}, fmt.Errorf("%w: %s is not a money resource", ErrInvalidResource, r.Name)
	}
	var err error
	if p.From, err = NormalizeKey(p.From); err != nil {
		return Decision{}, fmt.Errorf("from: %w", err)
	}
	if p.To, err = NormalizeKey(p.To); err != nil {
		return Decision{}, fmt.Errorf("to: %w", err)
	}
	if p.From == p.To {
		return Decision{}, fmt.Errorf("%w: %q cannot pay itself", ErrInvalidKey, p.From)
	}
	if err := validAmount(p.Amount); err != nil {
		return Decision{}, err
	}
	id := p.ID
	if id.IsZero() {
		id = NewID()
	}
	limit := Hold{Resource: r, Request: Request{User: p.From, Amount: p.Amount}}
	u := c.users.get(UserID(r.Ledger, p.From), r)
	if p.ID.IsZero() {
		if ds, ok := c.denyLocally([]Hold{limit}, []*user{u}); ok {
			return ds[0], nil
		}
	}
	o := c.payment(r, p, id, u)
	if err := c.submit(ctx, o); err != nil {
		// A payment is never made open, whatever the Policy.
		return Decision{Reason: Unavailable, ID: id}, &attemptError{id: id, err: err}
	}
	if o.ds == nil {
		return Decision{}, c.payFailure(o, r, p, id)
	}
	d := o.ds[0]
	if classify(o.res[1].Status) == outDenied {
		d.Reason, d.RetryAfter = InsufficientFunds, 0 // waiting does not bring money
		return d, nil
	}
	if err := c.exactRetryAfter(ctx, o); err != nil {
		return d, err
	}
	return o.ds[0], nil
}

// payment is the op of a payment: a pending reservation of its amount on
// r's limit ledger for u (p.From), linked to the transfer itself on r's
// currency ledger, whose ID is derived from the reservation's (id).
func (c *Client) payment(r Resource, p Payment, id ID, u *user) *op {
	reserve := newHold(r, u.id, p.Amount, tb.TransferFlags{Linked: true})
	reserve.ID, reserve.UserData64, reserve.Code = id.tb(), p.Ref, codeReserve
	o := &op{exact: c.exact}
	o.hold(reserve, u)
	o.add(tb.Transfer{
		ID:              derive(rolePayment, 0, string(id[:])).tb(),
		DebitAccountID:  CurrencyUserID(r.Currency, p.From).tb(),
		CreditAccountID: CurrencyUserID(r.Currency, p.To).tb(),
		Amount:          tb.ToUint128(p.Amount),
		UserData128:     id.tb(),
		UserData64:      p.Ref,
		Ledger:          r.Currency,
		Code:            codePayment,
	}, nil)
	return o
}

// payFailure explains why a payment's pair failed for a reason other than
// the limit or the funds.
func (c *Client) payFailure(o *op, r Resource, p Payment, id ID) error {
	for i, s := range o.res {
		switch classify(s.Status) {
		case outNoUser:
			if i == 0 {
				return fmt.Errorf("%w: %q has no limit on %s", ErrUnknownUser, p.From, r.Name)
			}
			return fmt.Errorf("%w: %q has no account on currency ledger %d", ErrUnknownUser, p.From, r.Currency)
		case outNoResource:
			if i == 0 {
				return fmt.Errorf("%w: no resource on ledger %d", ErrUnknownResource, r.Ledger)
			}
			return fmt.Errorf("%w: %q has no account on currency ledger %d", ErrUnknownUser, p.To, r.Currency)
		case outReusedID:
			return fmt.Errorf("%w: %s was already used for a different payment (%s)", ErrInvalidID, id, s.Status)
		case outUnexpected:
			return transferStatusError(i, s.Status)
		}
	}
	return fmt.Errorf("ledger: payment %s failed without a cause: %v", id, o.res)
}

// Fund credits req.Amount to req.User's account on a currency ledger, from
// the ledger's operator account (created by CreateResource for a money
// resource). Give req.ID to make a retry safe: a fund with an ID that was
// already applied is not applied again.
func (c *Client) Fund(ctx context.Context, currency uint32, req Request) error {
	if currency == 0 {
		return fmt.Errorf("%w: currency ledger 0", ErrInvalidResource)
	}
	var err error
	if req.User, err = NormalizeKey(req.User); err != nil {
		return err
	}
	if err := validAmount(req.Amount); err != nil {
		return err
	}
	id := req.ID
	if id.IsZero() {
		id = NewID()
	}
	res, err := c.conn.CreateTransfers(ctx, []tb.Transfer{{
		ID:              id.tb(),
		DebitAccountID:  CurrencyOperatorID(currency).tb(),
		CreditAccountID: CurrencyUserID(currency, req.User).tb(),
		Amount:          tb.ToUint128(req.Amount),
		UserData64:      req.Ref,
		Ledger:          currency,
		Code:            codeFund,
	}})
	if err != nil {
		return &attemptError{id: id, err: err}
	}
	switch s := res[0].Status; classify(s) {
	case outAdmitted:
		return nil
	case outNoUser:
		return fmt.Errorf("%w: currency ledger %d has no operator account (create a money resource on it first)", ErrUnknownResource, currency)
	case outNoResource:
		return fmt.Errorf("%w: %q has no account on currency ledger %d", ErrUnknownUser, req.User, currency)
	case outReusedID:
		return fmt.Errorf("%w: %s was already used for a different fund (%s)", ErrInvalidID, id, s)
	default:
		return transferStatusError(0, s)
	}
}

// Funds returns how much user key holds on a currency ledger.
func (c *Client) Funds(ctx context.Context, currency uint32, key string) (uint64, error) {
	key, err := NormalizeKey(key)
	if err != nil {
		return 0, err
	}
	a, ok, err := c.lookupAccount(ctx, CurrencyUserID(currency, key))
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%w: %q has no account on currency ledger %d", ErrUnknownUser, key, currency)
	}
	credits, ok1 := u64(a.CreditsPosted)
	debits, ok2 := u64(a.DebitsPosted)
	pending, ok3 := u64(a.DebitsPending)
	if !ok1 || !ok2 || !ok3 || debits+pending > credits {
		return 0, fmt.Errorf("ledger: currency account of %q: balance out of range", key)
	}
	return credits - debits - pending, nil
}
