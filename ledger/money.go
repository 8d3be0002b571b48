package ledger

import (
	"context"
	"fmt"
	"math"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/internal/u128"
	"github.com/tblimit/tblimit/ledger/internal/pipeline"
	"github.com/tblimit/tblimit/ledger/internal/status"
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
	// ID names the payment, as Request.ID names a request: a payment is
	// made at most once under an ID, and one refused (over the limit, or
	// short of funds) can be made again under the same ID.
	ID ID
	// Ref is stored with both transfers (user_data_64) for the audit trail.
	Ref uint64
	// Timeout is, for Authorize, how long the authorization holds the
	// money and the limit before both come back by themselves: whole
	// seconds, at most the resource's window; 0 is the window. Pay takes
	// none.
	Timeout time.Duration
}

// Pay makes a payment under a money limit with one linked pair of transfers:
// a hold (a pending transfer) of Amount on r's limit ledger that expires
// after r.Window, linked to the payment itself on r's currency ledger.
// TigerBeetle applies both or neither: over the limit (Reason
// LimitExceeded) or short of funds (Reason InsufficientFunds), nothing at
// all is written to either ledger. A payment is never made when the cluster is unavailable, whatever
// the Client's OnUnavailable.
func (c *Client) Pay(ctx context.Context, r Resource, p Payment) (Decision, error) {
	if err := checkPayment(r, &p); err != nil {
		return Decision{}, err
	}
	if p.Timeout != 0 {
		return Decision{}, fmt.Errorf("%w: a payment made at once has no timeout (Authorize has)", ErrInvalidWindow)
	}
	d, _, err := c.pay(ctx, r, p, false)
	return d, err
}

// checkPayment checks p, a payment under money resource r, and normalizes
// its keys.
func checkPayment(r Resource, p *Payment) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Kind != KindMoney {
		return fmt.Errorf("%w: %s is not a money resource", ErrInvalidResource, r.Name)
	}
	var err error
	if p.From, err = NormalizeKey(p.From); err != nil {
		return fmt.Errorf("from: %w", err)
	}
	if p.To, err = NormalizeKey(p.To); err != nil {
		return fmt.Errorf("to: %w", err)
	}
	if p.From == p.To {
		return fmt.Errorf("%w: %q cannot pay itself", ErrInvalidKey, p.From)
	}
	if p.Timeout != 0 {
		secs, err := WindowSeconds(p.Timeout)
		if err != nil {
			return fmt.Errorf("authorization timeout: %w", err)
		}
		if w, _ := WindowSeconds(r.Window); secs > w {
			return fmt.Errorf("%w: an authorization of %s cannot outlast its window %s", ErrInvalidWindow, p.Timeout, r.Window)
		}
	}
	return validAmount(p.Amount)
}

// pay decides payment p, made at once or, when authorize, held. It returns
// the decision and, when it admitted, the answer whose chain holds the
// limit and pays.
func (c *Client) pay(ctx context.Context, r Resource, p Payment, authorize bool) (Decision, answer, error) {
	limit := Part{Resource: r, Request: Request{User: p.From, Amount: p.Amount, ID: p.ID, Ref: p.Ref}}
	start := c.observeStart()
	u := c.users.get(r, p.From)
	seen := false
	if p.ID.IsZero() {
		var buf [1]Decision
		ds, denied, provisioned := c.denyLocally([]Part{limit}, []*user{u}, buf[:0])
		if denied {
			c.observe(start, []Part{limit}, ds, nil)
			return ds[0], answer{}, nil
		}
		seen = provisioned
	}
	var buf [1]Decision
	spec, chain := c.payment(r, p, u, authorize, seen)
	a, err := c.decide(ctx, spec, chain, []Part{limit}, buf[:0])
	d := soleDecision(a.ds)
	if err == nil && d.Allowed && a.earlier && !p.ID.IsZero() {
		// An unnamed payment found applied is this call's own, resent
		// (after an eviction, say): its transfers' IDs are new. A named one
		// may be another payment under the same ID.
		err = c.samePayment(ctx, r, p)
		if err != nil {
			d = Decision{}
		}
	}
	c.observe(start, []Part{limit}, []Decision{d}, err)
	return d, a, err
}

// payment is the chain of a payment: a hold of its amount on r's limit
// ledger for u (p.From), linked to the transfer itself on r's currency
// ledger, which carries the hold's ID in user_data_128. A payment is never
// made open, whatever the Client's OnUnavailable. When authorize, the
// payment is pending too, and both transfers expire after p.Timeout (the
// window when 0), so that a capture (Reservation.CommitN) or a release
// (Reservation.Cancel) ends both; the answer keeps the chain. seen: u was
// seen provisioned.
func (c *Client) payment(r Resource, p Payment, u *user, authorize, seen bool) (*opSpec, []step) {
	hold := newHold(r, u.id, p.Amount, tb.TransferFlags{Linked: true})
	hold.UserData64, hold.Code = p.Ref, codePayHold
	if !p.ID.IsZero() {
		hold.ID = p.ID.tb()
	}
	id := NewID()
	if !p.ID.IsZero() {
		id = paymentID(p.ID)
	}
	pay := tb.Transfer{
		ID:              id.tb(),
		DebitAccountID:  CurrencyUserID(r.Currency, p.From).tb(),
		CreditAccountID: CurrencyUserID(r.Currency, p.To).tb(),
		Amount:          tb.ToUint128(p.Amount),
		UserData128:     hold.ID,
		UserData64:      p.Ref,
		Ledger:          r.Currency,
		Code:            codePayment,
	}
	if authorize {
		secs, _ := WindowSeconds(r.Window)
		if p.Timeout != 0 {
			secs, _ = WindowSeconds(p.Timeout)
		}
		hold.Timeout, pay.Timeout = secs, secs
		pay.Flags = tb.TransferFlags{Pending: true}.ToUint16()
	}
	explain := func(t *tb.Transfer, out status.Outcome) error {
		payment := t.Code == codePayment
		switch {
		case !payment && out == status.NoUser:
			return fmt.Errorf("%w: %q has no limit on %s", ErrUnknownUser, p.From, r.Name)
		case !payment && out == status.NoResource:
			return fmt.Errorf("%w: no resource on ledger %d", ErrUnknownResource, r.Ledger)
		case out == status.NoUser:
			return fmt.Errorf("%w: %q has no account on currency ledger %d", ErrUnknownUser, p.From, r.Currency)
		case out == status.NoResource:
			return fmt.Errorf("%w: %q has no account on currency ledger %d", ErrUnknownUser, p.To, r.Currency)
		}
		return nil
	}
	return &opSpec{key: p.ID, seen: seen, exact: c.exact, payment: true, explain: explain, keep: authorize},
		[]step{{T: hold, User: u, Decide: true}, {T: pay}}
}

// Authorize authorizes payment p under money resource r, for capture
// later: a hold of p.Amount on From's limit and a pending payment of
// p.Amount from From to To on the currency ledger, linked, so that both are
// made or neither (over the limit, Reason LimitExceeded; short of funds,
// InsufficientFunds). The money is held, not moved: From cannot spend it
// elsewhere, To does not have it yet.
//
// End it with the Reservation's CommitN(n) to capture n ≤ p.Amount (n moves
// to To, From's limit keeps n until the window ends, the rest of both comes
// back), or Cancel to release it all. One neither captured nor released
// expires after p.Timeout (the window when 0) and both come back. Under a
// request ID (p.ID) the authorization, its capture and its release are each
// applied once however often they are retried; like a payment, an
// authorization is never made open when the cluster is unavailable.
func (c *Client) Authorize(ctx context.Context, r Resource, p Payment) (*Reservation, error) {
	if err := checkPayment(r, &p); err != nil {
		return nil, err
	}
	d, a, err := c.pay(ctx, r, p, true)
	if err != nil || !d.Allowed {
		if err != nil && d.Reason == Undecided {
			return nil, err
		}
		return &Reservation{c: c, res: r, d: d}, err
	}
	rv := &Reservation{c: c, res: r, u: c.users.get(r, p.From), d: d}
	hold := a.chain[a.holds[0]]
	if !a.earlier {
		rv.heldAt = d.Timestamp
	} else if hold, err = c.heldUnder(ctx, r.Ledger, codePayHold, p.ID, !a.marked); err != nil {
		return nil, err
	} else {
		rv.heldAt = hold.Timestamp
	}
	rv.t = hold
	rv.t.PendingID, rv.t.ID, rv.t.Timestamp, rv.t.Flags = hold.ID, tb.Uint128{}, 0, 0
	if !a.earlier {
		for _, t := range a.chain {
			if t.Code == codePayment {
				t.PendingID = t.ID
				rv.pay = &t
			}
		}
	} else if rv.pay, err = c.authorized(ctx, r, hold.ID); err != nil {
		return nil, err
	}
	if rv.pay == nil {
		return nil, fmt.Errorf("%w: %s named a payment made at once, not an authorization", ErrIDReused, p.ID)
	}
	return rv, nil
}

// authorized returns the pending payment linked to limit hold hold on r
// (nil when the hold's payment was made at once, by Pay).
func (c *Client) authorized(ctx context.Context, r Resource, hold tb.Uint128) (*tb.Transfer, error) {
	f := tb.QueryFilter{UserData128: hold, Ledger: r.Currency, Code: codePayment}
	ts, err := c.conn.QueryTransfers(ctx, &f, 2)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.TransferFlags().Pending {
			t.PendingID = t.ID
			return &t, nil
		}
	}
	return nil, nil
}

// paymentID is the ID of the transfer that pays a payment named id, so
// that an admission found again under id can be checked against it.
func paymentID(id ID) ID { return derive(rolePayment, 0, string(id[:])) }

// samePayment checks, for a payment whose ID was admitted by an earlier
// attempt, that the earlier one was this payment: TigerBeetle found the
// hold (the same user and amount), but the payee is the transfer
// after it, which a chain that failed at its first event never reached.
// A payment admitted by a later attempt under the ID (after a denial)
// may have paid under another transfer ID; its marker named the payee.
func (c *Client) samePayment(ctx context.Context, r Resource, p Payment) error {
	ts, err := c.conn.LookupTransfers(ctx, []tb.Uint128{paymentID(p.ID).tb()})
	if err != nil {
		return &attemptError{id: p.ID, err: err} // the payment was made, and is retried by its ID
	}
	if len(ts) == 0 {
		return nil
	}
	t := ts[0]
	paid, _ := u64(t.Amount)
	if t.CreditAccountID != CurrencyUserID(r.Currency, p.To).tb() || t.DebitAccountID != CurrencyUserID(r.Currency, p.From).tb() ||
		t.Amount != tb.ToUint128(p.Amount) || t.Ledger != r.Currency {
		return fmt.Errorf("%w: %s named a payment of %d on currency ledger %d to another payee or amount (it was made, once)",
			ErrIDReused, p.ID, paid, t.Ledger)
	}
	return nil
}

// MaxSupply is the most of a currency that Fund lets exist in all (the
// currency operator's posted debits): so that no balance can outgrow the
// 64 bits an amount has here, however payments gather it.
const MaxSupply = math.MaxInt64

// Fund credits req.Amount to req.User's account on a currency ledger, from
// the ledger's operator account (created by CreateResource for a money
// resource). req.ID names the fund as Request.ID names a request: a fund is
// made at most once under an ID. A fund that would take the currency's
// supply beyond MaxSupply is refused with ErrInvalidAmount, and nothing is
// written.
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
	if err := c.checkSupply(ctx, currency, req.Amount); err != nil {
		return err
	}
	id := req.ID
	if id.IsZero() {
		id = NewID()
	}
	fund := tb.Transfer{
		ID:              id.tb(),
		DebitAccountID:  CurrencyOperatorID(currency).tb(),
		CreditAccountID: CurrencyUserID(currency, req.User).tb(),
		Amount:          tb.ToUint128(req.Amount),
		UserData64:      req.Ref,
		Ledger:          currency,
		Code:            codeFund,
	}
	res, err := c.send(ctx, &opSpec{key: req.ID, retrySpent: true}, []step{{T: fund}})
	if err != nil {
		return &attemptError{id: id, err: err}
	}
	return fundOutcome(res, currency, req.User, id)
}

// fundOutcome reads res, the answer to a fund.
func fundOutcome(res []tb.CreateTransferResult, currency uint32, user string, id ID) error {
	if _, decided, _ := pipeline.ChainOutcome(res); decided && !anyStatus(res, status.Denied) {
		return nil // created, or made earlier under the ID
	}
	for i, s := range res {
		switch status.Classify(s.Status) {
		case status.NoUser:
			return fmt.Errorf("%w: currency ledger %d has no operator account (create a money resource on it first)", ErrUnknownResource, currency)
		case status.NoResource:
			return fmt.Errorf("%w: %q has no account on currency ledger %d", ErrUnknownUser, user, currency)
		case status.ReusedID:
			return fmt.Errorf("%w: %s named a fund with %s", ErrIDReused, id, status.Differs(s.Status))
		case status.Admitted, status.Linked:
		default:
			return transferStatusError(i, s.Status)
		}
	}
	return fmt.Errorf("ledger: fund %s failed without a cause: %v", id, res)
}

func anyStatus(res []tb.CreateTransferResult, out status.Outcome) bool {
	for _, s := range res {
		if status.Classify(s.Status) == out {
			return true
		}
	}
	return false
}

// checkSupply refuses a fund of amount that would take the currency's
// supply beyond MaxSupply. (Two funds at once may both pass: together they
// still stay within 64 bits.)
func (c *Client) checkSupply(ctx context.Context, currency uint32, amount uint64) error {
	a, ok, err := c.lookupAccount(ctx, CurrencyOperatorID(currency))
	if err != nil || !ok {
		return err // a missing operator is reported by the fund itself
	}
	supply, fits := u64(a.DebitsPosted)
	if !fits || supply > MaxSupply-amount {
		return fmt.Errorf("%w: %d more would make more than %d of currency ledger %d exist (%s do)",
			ErrInvalidAmount, amount, uint64(MaxSupply), currency, u128.Decimal(a.DebitsPosted))
	}
	return nil
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
	held, borrow := u128.Sub(a.CreditsPosted, a.DebitsPosted)
	held, borrow2 := u128.Sub(held, a.DebitsPending)
	funds, fits := u64(held)
	if borrow || borrow2 || !fits {
		return 0, fmt.Errorf("ledger: %q on currency ledger %d holds more than 64 bits count (credits %s, debits %s posted, %s pending)",
			key, currency, u128.Decimal(a.CreditsPosted), u128.Decimal(a.DebitsPosted), u128.Decimal(a.DebitsPending))
	}
	return funds, nil
}
