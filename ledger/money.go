package ledger

import (
	"context"
	"fmt"
	"strings"

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
	if err := validKey(p.From); err != nil {
		return Decision{}, fmt.Errorf("from: %w", err)
	}
	if err := validKey(p.To); err != nil {
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
	reserve := hold(r, UserID(r.Ledger, p.From), p.Amount, tb.TransferFlags{Linked: true})
	reserve.ID, reserve.UserData64, reserve.Code = id.tb(), p.Ref, codeReserve
	chain := []tb.Transfer{reserve, {
		ID:              derive(rolePayment, 0, string(id[:])).tb(),
		DebitAccountID:  CurrencyUserID(r.Currency, p.From).tb(),
		CreditAccountID: CurrencyUserID(r.Currency, p.To).tb(),
		Amount:          tb.ToUint128(p.Amount),
		UserData128:     id.tb(),
		UserData64:      p.Ref,
		Ledger:          r.Currency,
		Code:            codePayment,
	}}
	limitAccount := fromTB(chain[0].DebitAccountID)
	res, accounts, err := c.submit(ctx, chain, []ID{limitAccount})
	if err != nil {
		if _, ok := AttemptID(err); !ok {
			err = &attemptError{id: id, err: err}
		}
		return Decision{Reason: Unavailable, ID: id}, err
	}
	d := Decision{ID: id, Timestamp: res[0].Timestamp}
	for i, s := range res {
		switch s.Status {
		case tb.TransferCreated, tb.TransferLinkedEventFailed:
		case tb.TransferExceedsCredits, tb.TransferIDAlreadyFailed:
			d.Reason = LimitExceeded
			if i == 1 {
				d.Reason = InsufficientFunds
			}
		case tb.TransferDebitAccountNotFound:
			if i == 0 {
				return Decision{}, fmt.Errorf("%w: %q has no limit on %s", ErrUnknownUser, p.From, r.Name)
			}
			return Decision{}, fmt.Errorf("%w: %q has no account on currency ledger %d", ErrUnknownUser, p.From, r.Currency)
		case tb.TransferCreditAccountNotFound:
			if i == 0 {
				return Decision{}, fmt.Errorf("%w: no resource on ledger %d", ErrUnknownResource, r.Ledger)
			}
			return Decision{}, fmt.Errorf("%w: %q has no account on currency ledger %d", ErrUnknownUser, p.To, r.Currency)
		default:
			if strings.HasPrefix(s.Status.String(), "TransferExistsWith") {
				return Decision{}, fmt.Errorf("%w: %s was already used for a different payment (%s)", ErrInvalidID, id, s.Status)
			}
			return Decision{}, transferStatusError(i, s.Status)
		}
	}
	d.Allowed = d.Reason == Admitted
	ds := []Decision{d}
	err = c.explain(ctx, []Hold{{Resource: r, Request: Request{User: p.From, Amount: p.Amount}}}, []ID{limitAccount}, accounts, ds)
	if ds[0].Reason == InsufficientFunds {
		ds[0].RetryAfter = 0 // waiting does not bring money
	}
	return ds[0], err
}

// Fund credits req.Amount to req.User's account on a currency ledger, from
// the ledger's operator account (created by CreateResource for a money
// resource). Give req.ID to make a retry safe: a fund with an ID that was
// already applied is not applied again.
func (c *Client) Fund(ctx context.Context, currency uint32, req Request) error {
	if currency == 0 {
		return fmt.Errorf("%w: currency ledger 0", ErrInvalidResource)
	}
	if err := validKey(req.User); err != nil {
		return err
	}
	if err := validAmount(req.Amount); err != nil {
		return err
	}
	id := req.ID
	if id.IsZero() {
		id = NewID()
	}
	res, err := c.createTransfers(ctx, []tb.Transfer{{
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
	switch s := res[0].Status; s {
	case tb.TransferCreated:
		return nil
	case tb.TransferDebitAccountNotFound:
		return fmt.Errorf("%w: currency ledger %d has no operator account (create a money resource on it first)", ErrUnknownResource, currency)
	case tb.TransferCreditAccountNotFound:
		return fmt.Errorf("%w: %q has no account on currency ledger %d", ErrUnknownUser, req.User, currency)
	default:
		return transferStatusError(0, s)
	}
}

// Funds returns how much user key holds on a currency ledger.
func (c *Client) Funds(ctx context.Context, currency uint32, key string) (uint64, error) {
	if err := validKey(key); err != nil {
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
