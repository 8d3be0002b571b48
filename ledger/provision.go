package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tblimit/tblimit/ledger/internal/status"
	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// operatorAccount encodes r in its operator account, so that every process
// reads one definition of the resource from the cluster:
// code = codeOperator + 10*kind + lazy, user_data_128 = name (12 bytes) and
// currency ledger (4 bytes), user_data_64 = default limit, user_data_32 =
// window in seconds.
func operatorAccount(r Resource) tb.Account {
	var ud [16]byte
	copy(ud[:MaxNameLen], r.Name)
	binary.LittleEndian.PutUint32(ud[12:], r.Currency)
	code := codeOperator + 10*uint16(r.Kind)
	if r.Lazy {
		code++
	}
	secs, _ := WindowSeconds(r.Window)
	return tb.Account{
		ID:          OperatorID(r.Ledger).tb(),
		UserData128: tb.BytesToUint128(ud),
		UserData64:  r.DefaultLimit,
		UserData32:  secs,
		Ledger:      r.Ledger,
		Code:        code,
	}
}

func resourceFromAccount(a tb.Account) (Resource, error) {
	ud := a.UserData128.Bytes()
	code := int(a.Code) - codeOperator
	r := Resource{
		Name:         string(bytes.TrimRight(ud[:MaxNameLen], "\x00")),
		Ledger:       a.Ledger,
		Kind:         Kind(code / 10),
		Lazy:         code%10 == 1,
		Currency:     binary.LittleEndian.Uint32(ud[12:]),
		DefaultLimit: a.UserData64,
		Window:       time.Duration(a.UserData32) * time.Second,
	}
	if code < 0 || code%10 > 1 || r.Validate() != nil || OperatorID(a.Ledger) != fromTB(a.ID) {
		return Resource{}, fmt.Errorf("%w: account %s on ledger %d is not a tblimit operator account", ErrUnknownResource, fromTB(a.ID), a.Ledger)
	}
	return r, nil
}

// CreateResource creates r's operator account (and, for money, the currency
// ledger's operator account) unless they exist. It is idempotent: creating
// the same resource again succeeds, while a different definition on the same
// ledger fails with ErrResourceMismatch and changes nothing.
func (c *Client) CreateResource(ctx context.Context, r Resource) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if old, err := c.Resource(ctx, r.Ledger); err == nil {
		if old != r {
			return fmt.Errorf("%w: ledger %d holds %v, not %v", ErrResourceMismatch, r.Ledger, old, r)
		}
	} else if !errors.Is(err, ErrUnknownResource) {
		return err
	}
	accounts := append([]tb.Account{operatorAccount(r)}, markerAccountsOf(r.Ledger)...)
	if r.Kind == KindMoney {
		accounts = append(accounts, tb.Account{
			ID: CurrencyOperatorID(r.Currency).tb(), Ledger: r.Currency, Code: codeCurrencyOperator,
		})
		accounts = append(accounts, markerAccountsOf(r.Currency)...)
	}
	res, err := c.conn.CreateAccounts(ctx, accounts)
	if err != nil {
		return err
	}
	for i, s := range res {
		switch {
		case status.AccountMade(s.Status):
		case status.AccountExistsDifferently(s.Status):
			if i == 0 {
				return fmt.Errorf("%w: ledger %d holds an account of %s", ErrResourceMismatch, r.Ledger, strings.TrimPrefix(status.Differs(s.Status), "another "))
			}
			return fmt.Errorf("%w: ledger %d has a foreign account %s where tblimit keeps one of its own: %s",
				ErrResourceMismatch, accounts[i].Ledger, fromTB(accounts[i].ID), s.Status)
		default:
			return accountStatusError(i, s.Status)
		}
	}
	return nil
}

// Resource reads the definition of the resource on ledger from the cluster.
func (c *Client) Resource(ctx context.Context, ledger uint32) (Resource, error) {
	a, ok, err := c.lookupAccount(ctx, OperatorID(ledger))
	if err != nil {
		return Resource{}, err
	}
	if !ok {
		return Resource{}, fmt.Errorf("%w: no resource on ledger %d", ErrUnknownResource, ledger)
	}
	return resourceFromAccount(a)
}

// Resources lists every resource in the cluster, ordered by creation.
func (c *Client) Resources(ctx context.Context) ([]Resource, error) {
	var all []tb.Account
	for kind := KindRequests; kind <= KindMoney; kind++ {
		for lazy := uint16(0); lazy <= 1; lazy++ {
			as, err := c.queryAccounts(ctx, tb.QueryFilter{Code: codeOperator + 10*uint16(kind) + lazy})
			if err != nil {
				return nil, err
			}
			all = append(all, as...)
		}
	}
	sortAccounts(all)
	out := make([]Resource, 0, len(all))
	for _, a := range all {
		if r, err := resourceFromAccount(a); err == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// checkResource verifies that r is valid and matches the definition in the
// cluster, so that nothing is written for an unknown or changed resource.
// A resource's definition cannot change once created (it lives in an
// immutable account), so one check per Client is enough.
func (c *Client) checkResource(ctx context.Context, r Resource) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if known, ok := c.resources.Load(r.Ledger); ok && known.(Resource) == r {
		return nil
	}
	old, err := c.Resource(ctx, r.Ledger)
	if err != nil {
		return err
	}
	if old != r {
		return fmt.Errorf("%w: ledger %d holds %v, not %v", ErrResourceMismatch, r.Ledger, old, r)
	}
	c.resources.Store(r.Ledger, r)
	return nil
}

// UserLimit is one user's limit, for Provision.
type UserLimit struct {
	Key   string
	Limit uint64
}

// Provision makes sure that users exist on r with the given limits: it
// creates their accounts and credits each its limit exactly once however
// often it is re-run or retried, and gives a user that already exists with a
// different limit that limit (SetLimit). For money resources it also opens each
// user's account on the currency ledger. Any number of users may be given:
// they are sent in batches of up to BatchMax. Every key is validated before
// anything is written.
func (c *Client) Provision(ctx context.Context, r Resource, users ...UserLimit) error {
	return c.provision(ctx, r, users, true)
}

// provision creates users and, when ensure is set, corrects the limits of
// those that existed with other limits. Lazy provisioning does not ensure:
// a limit set meanwhile by an operator must stand.
func (c *Client) provision(ctx context.Context, r Resource, users []UserLimit, ensure bool) error {
	seen := make(map[string]int, len(users))
	users = slices.Clone(users)
	for i := range users {
		u := &users[i]
		key, err := NormalizeKey(u.Key)
		if err != nil {
			return fmt.Errorf("user %d: %w", i, err)
		}
		u.Key = key
		if j, dup := seen[u.Key]; dup {
			return fmt.Errorf("%w: user %d: key %q is also user %d", ErrInvalidKey, i, u.Key, j)
		}
		seen[u.Key] = i
	}
	if err := c.checkResource(ctx, r); err != nil {
		return err
	}
	per := BatchMax
	if r.Kind == KindMoney {
		per = BatchMax / 2
	}
	for len(users) > 0 {
		n := min(per, len(users))
		if err := c.provisionBatch(ctx, r, users[:n], ensure); err != nil {
			return err
		}
		users = users[n:]
	}
	return nil
}

func userAccount(r Resource, key string) tb.Account {
	var ud [16]byte
	if len(key) <= 16 {
		copy(ud[:], key) // short keys are kept readable for listings
	}
	return tb.Account{
		ID:          UserID(r.Ledger, key).tb(),
		UserData128: tb.BytesToUint128(ud),
		Ledger:      r.Ledger,
		Code:        codeUser,
		Flags:       tb.AccountFlags{DebitsMustNotExceedCredits: true}.ToUint16(),
	}
}

func currencyAccount(currency uint32, key string) tb.Account {
	a := userAccount(Resource{Ledger: currency}, key)
	a.ID = CurrencyUserID(currency, key).tb()
	a.Code = codeCurrencyUser
	return a
}

func provisionTransfer(r Resource, key string, limit uint64) tb.Transfer {
	return tb.Transfer{
		ID:              provisionID(r.Ledger, key).tb(),
		DebitAccountID:  OperatorID(r.Ledger).tb(),
		CreditAccountID: UserID(r.Ledger, key).tb(),
		Amount:          tb.ToUint128(limit),
		Ledger:          r.Ledger,
		Code:            codeProvision,
	}
}

func (c *Client) provisionBatch(ctx context.Context, r Resource, users []UserLimit, ensure bool) error {
	accounts := make([]tb.Account, 0, 2*len(users))
	of := make([]int, 0, 2*len(users)) // the user each account is of
	first := make([]int, len(users))   // where each user's limit account is
	for i, u := range users {
		first[i] = len(accounts)
		accounts = append(accounts, userAccounts(r, u.Key)...)
		for len(of) < len(accounts) {
			of = append(of, i)
		}
	}
	ares, err := c.conn.CreateAccounts(ctx, accounts)
	if err != nil {
		return err
	}
	for i, s := range ares {
		if !status.AccountMade(s.Status) {
			return fmt.Errorf("ledger: provision %q: %w", users[of[i]].Key, accountStatusError(i, s.Status))
		}
	}
	transfers := make([]tb.Transfer, len(users))
	for i, u := range users {
		transfers[i] = provisionTransfer(r, u.Key, u.Limit)
	}
	tres, err := c.conn.CreateTransfers(ctx, transfers)
	if err != nil {
		return err
	}
	for i, s := range tres {
		cr := status.ClassifyCredit(s.Status)
		if cr == status.CreditFailed {
			return fmt.Errorf("ledger: provision %q: %w", users[i].Key, transferStatusError(i, s.Status))
		}
		c.users.provisioned(r, users[i].Key)
		// An account this call created and credited holds nothing else:
		// the Client knows all of it.
		if status.AccountNew(ares[first[i]].Status) && cr == status.CreditNow {
			c.users.knownLimit(r, users[i].Key, users[i].Limit, true, c.localNow())
		}
	}
	if !ensure {
		return nil
	}
	return c.ensureLimits(ctx, r, users)
}

// ensureLimits gives the users that existed with another limit the one
// asked (SetLimit).
func (c *Client) ensureLimits(ctx context.Context, r Resource, users []UserLimit) error {
	ids := make([]ID, len(users))
	for i, u := range users {
		ids[i] = UserID(r.Ledger, u.Key)
	}
	found, err := c.lookupAccounts(ctx, ids)
	if err != nil {
		return err
	}
	limits := make(map[ID]uint64, len(found))
	for _, a := range found {
		b, err := balanceOf(a)
		if err != nil {
			return err
		}
		limits[fromTB(a.ID)] = b.Limit
	}
	for i, u := range users {
		if got, ok := limits[ids[i]]; !ok || got != u.Limit {
			if err := c.SetLimit(ctx, r, u.Key, u.Limit); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetLimit changes user key's limit on r to limit. Raising credits the
// difference at once. Lowering takes back what is available at once and, for
// the rest, turns units in flight into permanent debits, so that the account
// never admits more than the new limit once the units now in flight have
// expired, and meanwhile admits nothing it could not have admitted under the
// old limit. It is correct with requests in flight and with concurrent
// SetLimit calls (each change is a compare-and-set on the account's posted
// balance), and idempotent: setting the limit a user already has writes
// nothing.
func (c *Client) SetLimit(ctx context.Context, r Resource, key string, limit uint64) (err error) {
	if key, err = NormalizeKey(key); err != nil {
		return err
	}
	if err := c.checkResource(ctx, r); err != nil {
		return err
	}
	uid := UserID(r.Ledger, key)
	// What this Client's view held of the old limit is void: the new limit
	// stands, and what SetLimit posted or held shows in the next read.
	defer func() {
		if err == nil {
			c.users.knownLimit(r, key, limit, false, c.localNow())
		} else {
			c.users.forget(r.Ledger, key)
		}
	}()
	var attempt uint64
	var lastState [2]tb.Uint128 // credits and debits posted at the last step
	for step := 0; step < maxLimitSteps; step++ {
		a, ok, err := c.lookupAccount(ctx, uid)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %q on %s", ErrUnknownUser, key, r.Name)
		}
		// A step that left the posted balance as it was (it raced, or a
		// balancing debit found nothing) spent its ID: the next one from
		// the same balance needs another.
		if state := [2]tb.Uint128{a.CreditsPosted, a.DebitsPosted}; step > 0 && state == lastState {
			attempt++
		} else {
			lastState, attempt = state, 0
		}
		b, err := balanceOf(a)
		if err != nil || b.Limit == limit {
			return err
		}
		t, err := c.limitStep(ctx, r, uid, b, limit, stateID(uid, a.CreditsPosted, a.DebitsPosted, attempt))
		if err != nil {
			return fmt.Errorf("ledger: set limit of %q: %w", key, err)
		}
		if err := c.sendLimitStep(ctx, t); err != nil {
			return fmt.Errorf("ledger: set limit of %q: %w", key, err)
		}
	}
	return fmt.Errorf("ledger: set limit of %q: no progress after %d steps", key, maxLimitSteps)
}

// limitStep returns the transfers of one step from balance b of account
// uid towards limit, with id: a raise credits the difference; lowering
// takes back what is available (a balancing debit moves as much as there
// is, up to the difference) or else posts units in flight. It returns none
// when what was in flight expired meanwhile.
func (c *Client) limitStep(ctx context.Context, r Resource, uid ID, b balance, limit uint64, id ID) ([]tb.Transfer, error) {
	switch {
	case limit > b.Limit:
		return []tb.Transfer{{
			ID:              id.tb(),
			DebitAccountID:  OperatorID(r.Ledger).tb(),
			CreditAccountID: uid.tb(),
			Amount:          tb.ToUint128(limit - b.Limit),
			Ledger:          r.Ledger,
			Code:            codeRaise,
		}}, nil
	case b.Available > 0:
		return []tb.Transfer{{
			ID:              id.tb(),
			DebitAccountID:  uid.tb(),
			CreditAccountID: OperatorID(r.Ledger).tb(),
			Amount:          tb.ToUint128(b.Limit - limit),
			Ledger:          r.Ledger,
			Code:            codeLower,
			Flags:           tb.TransferFlags{BalancingDebit: true}.ToUint16(),
		}}, nil
	}
	return c.lowerInFlight(ctx, r, uid, b.Limit-limit)
}

// sendLimitStep sends a step of SetLimit. A step that raced with requests,
// expiry or another SetLimit (which won from the same balance) is not an
// error: the next step looks again.
func (c *Client) sendLimitStep(ctx context.Context, t []tb.Transfer) error {
	if len(t) == 0 {
		return nil
	}
	res, err := c.conn.CreateTransfers(ctx, t)
	if err != nil {
		return err
	}
	for i, s := range res {
		if !status.LimitStepApplied(s.Status) {
			return transferStatusError(i, s.Status)
		}
	}
	return nil
}

// maxLimitSteps bounds SetLimit's loop; each step makes progress unless it
// races, so this is only reached if something is wrong.
const maxLimitSteps = 10000

// lowerInFlight returns the transfers that take up to by units of limit
// back when none is available: they post the units in flight that return
// first (at most maxLowerPosts holds a step), making them permanent. If the
// last of them is larger than what is left to take, its excess is given
// back and held by a pending transfer until the units would have returned,
// so nothing returns earlier than it would have. It returns nil when
// nothing is in flight any more.
func (c *Client) lowerInFlight(ctx context.Context, r Resource, uid ID, by uint64) ([]tb.Transfer, error) {
	now := uint64(c.now().UnixNano())
	flights, err := c.readFlights(ctx, uid, maxTimeout(r.Window), now, by, true)
	if err != nil || len(flights) == 0 {
		return nil, err
	}
	op := OperatorID(r.Ledger).tb()
	var out []tb.Transfer
	left := by
	for _, f := range flights[:min(len(flights), maxLowerPosts)] {
		if left == 0 {
			break
		}
		post := tb.Transfer{
			ID:              endID(roleLowerPost, f.id).tb(),
			PendingID:       f.id.tb(),
			DebitAccountID:  uid.tb(),
			CreditAccountID: op,
			Amount:          tb.ToUint128(f.amount),
			Ledger:          r.Ledger,
			Code:            f.code,
			Flags:           tb.TransferFlags{PostPendingTransfer: true}.ToUint16(),
		}
		if f.amount <= left {
			out = append(out, post)
			left -= f.amount
			continue
		}
		out = append(out, c.postPart(r, f, post, f.amount-left, now)...)
		left = 0
	}
	return out, nil
}

// postPart returns the chain that posts flight f (post) of which only
// part is to be taken back: the excess is refunded and held by a pending
// transfer until f would have returned, so that nothing returns earlier
// than it would have.
func (c *Client) postPart(r Resource, f flight, post tb.Transfer, excess, now uint64) []tb.Transfer {
	post.Flags = tb.TransferFlags{PostPendingTransfer: true, Linked: true}.ToUint16()
	refund := tb.Transfer{
		ID:              derive(roleRefund, 0, string(f.id[:])).tb(),
		DebitAccountID:  post.CreditAccountID,
		CreditAccountID: post.DebitAccountID,
		Amount:          tb.ToUint128(excess),
		Ledger:          r.Ledger,
		Code:            codeRefund,
		Flags:           tb.TransferFlags{Linked: true}.ToUint16(),
	}
	// The hold lasts until the unit would have expired, rounded up to whole
	// seconds, plus, on a remote cluster, a second for the difference
	// between this clock and the cluster's.
	secs := (f.expires - min(now, f.expires) + uint64(time.Second) - 1) / uint64(time.Second)
	if !c.conn.InProcess() {
		secs++
	}
	hold := tb.Transfer{
		ID:              derive(roleRefundLock, 0, string(f.id[:])).tb(),
		DebitAccountID:  post.DebitAccountID,
		CreditAccountID: post.CreditAccountID,
		Amount:          tb.ToUint128(excess),
		Timeout:         uint32(min(secs, math.MaxUint32)),
		Ledger:          r.Ledger,
		Code:            codeRefundLock,
		Flags:           tb.TransferFlags{Pending: true}.ToUint16(),
	}
	return []tb.Transfer{post, refund, hold}
}

// maxLowerPosts bounds the holds one step of SetLimit posts: a request a
// --development server takes.
const maxLowerPosts = 64
