package recipes

import (
	"context"

	"github.com/tblimit/tblimit/ledger"
)

// MoneyPerWindow limits how much each user may pay per window, e.g. 1000 USD
// a day. A payment is a linked pair: a hold (a pending transfer) on the
// limit ledger, expiring after the window, and the payment itself on the
// currency ledger. Both happen or neither does: over the limit, or short of
// funds, nothing is written to either ledger.
//
// A MoneyPerWindow is safe for concurrent use. Most callers want Pay.
type MoneyPerWindow struct{ recipe }

// NewMoneyPerWindow returns a money limiter with the default limit l (e.g.
// Amount(1000_00).Per(24*time.Hour)) for payments on the currency ledger. It
// does no I/O: call Create once.
func NewMoneyPerWindow(c *ledger.Client, cfg Config, currency uint32, l Limit) (*MoneyPerWindow, error) {
	base, err := newRecipe(c, cfg, CurrencyUnits, l, currency)
	if err != nil {
		return nil, err
	}
	return &MoneyPerWindow{base}, nil
}

// Pay moves amount from user from to user to if from's limit and funds allow,
// and reports why not otherwise (Result.Reason: ledger.LimitExceeded or
// ledger.InsufficientFunds). The Result's ID names the payment.
func (m *MoneyPerWindow) Pay(ctx context.Context, from, to string, amount uint64) (Result, error) {
	return m.PayID(ctx, ledger.ID{}, from, to, amount)
}

// PayID is Pay under request ID id (see ledger.Request.ID): the payment is
// made at most once under id, however often it is retried (after a lost
// answer, from any process), and one refused (over the limit, or short of
// funds) can be made again under id later. ledger.KeyID derives an ID from
// an order or payment number.
func (m *MoneyPerWindow) PayID(ctx context.Context, id ledger.ID, from, to string, amount uint64) (res Result, err error) {
	d, err := m.c.Pay(ctx, m.res, ledger.Payment{From: from, To: to, Amount: amount, ID: id})
	m.result(&res, from, amount, &d)
	return res, err
}

// Fund credits amount to user key's account on the currency ledger.
func (m *MoneyPerWindow) Fund(ctx context.Context, key string, amount uint64) error {
	return m.c.Fund(ctx, m.res.Currency, ledger.Request{User: key, Amount: amount})
}

// Funds returns how much user key holds on the currency ledger.
func (m *MoneyPerWindow) Funds(ctx context.Context, key string) (uint64, error) {
	return m.c.Funds(ctx, m.res.Currency, key)
}
