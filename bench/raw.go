package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

const batchMax = 8189 // events per TigerBeetle request

// acct returns a deterministic account ID on ledger l: 0 is the operator,
// k+1 is user k.
func acct(l uint32, k int) tb.Uint128 { return u128(uint64(k)+1, uint64(l)) }

func u128(lo, hi uint64) tb.Uint128 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], lo)
	binary.LittleEndian.PutUint64(b[8:], hi)
	return tb.BytesToUint128(b)
}

// rawID returns a new time-ordered transfer ID the way TigerBeetle
// recommends (milliseconds in the top 48 bits), counted up atomically
// instead of under tb.ID's lock.
func rawID() tb.Uint128 {
	ms := uint64(time.Now().UnixMilli())
	return u128(rawSeq.Add(1), uint64(rawTag)|ms<<16)
}

var (
	rawSeq atomic.Uint64
	rawTag uint16
)

func init() {
	var seed [10]byte
	if _, err := rand.Read(seed[:]); err != nil {
		panic(err)
	}
	rawSeq.Store(binary.LittleEndian.Uint64(seed[:8]))
	rawTag = binary.LittleEndian.Uint16(seed[8:])
}

// rawSetup creates, on ledger l of c, an operator account and one account
// per user flagged debits_must_not_exceed_credits and credited with the
// limit: the accounts tblimit keeps, made with plain tb.Client calls. Each
// decision is then one pending transfer user -> operator of 1 unit with
// timeout = window, sent alone in one CreateTransfers call. On the
// arrivals, no user is created before the clock starts: see rawLazySetup.
func rawSetup(c tb.Client, l uint32, cl cell) (*instance, error) {
	if cl.w.arrivals() {
		return rawLazySetup(c, l, cl)
	}
	users := cl.w.users
	accounts := make([]tb.Account, 0, users+1)
	accounts = append(accounts, rawOperator(l))
	for k := range users {
		accounts = append(accounts, rawUser(l, k))
	}
	for part := range chunks(accounts, batchMax) {
		res, err := c.CreateAccounts(part)
		if err != nil {
			return nil, fmt.Errorf("create_accounts: %w", err)
		}
		for _, r := range res {
			if r.Status != tb.AccountCreated {
				return nil, fmt.Errorf("create_accounts: %v", r.Status)
			}
		}
	}
	credits := make([]tb.Transfer, users)
	for k := range credits {
		credits[k] = rawCredit(l, k, cl.w.limit)
	}
	for part := range chunks(credits, batchMax) {
		res, err := c.CreateTransfers(part)
		if err != nil {
			return nil, fmt.Errorf("create_transfers: %w", err)
		}
		for _, r := range res {
			if r.Status != tb.TransferCreated {
				return nil, fmt.Errorf("create_transfers: %v", r.Status)
			}
		}
	}
	hold := rawHolds(l, cl.window)
	return &instance{allow: func(_ context.Context, k int) (bool, error) {
		return sendHold(c, hold(k))
	}}, nil
}

// rawCode is the code of the raw rows' accounts and transfers.
const rawCode = 10

// rawOperator is the operator account of ledger l, which credits every
// user's limit and receives its holds.
func rawOperator(l uint32) tb.Account { return tb.Account{ID: acct(l, -1), Ledger: l, Code: rawCode} }

// rawUser is the account of user k on ledger l: flagged
// debits_must_not_exceed_credits, so that its credit is its limit.
func rawUser(l uint32, k int) tb.Account {
	return tb.Account{ID: acct(l, k), Ledger: l, Code: rawCode, Flags: tb.AccountFlags{DebitsMustNotExceedCredits: true}.ToUint16()}
}

// rawCredit is the credit of user k's limit on ledger l, operator -> user.
func rawCredit(l uint32, k int, limit uint64) tb.Transfer {
	return tb.Transfer{ID: u128(uint64(k)+1, uint64(l)|1<<40), DebitAccountID: acct(l, -1),
		CreditAccountID: acct(l, k), Amount: tb.ToUint128(limit), Ledger: l, Code: rawCode}
}

// rawHolds returns the hold of one decision of user k on ledger l: a
// pending transfer user -> operator of 1 unit with timeout = window.
func rawHolds(l uint32, window time.Duration) func(k int) tb.Transfer {
	secs := uint32(window / time.Second)
	op := acct(l, -1)
	one := tb.ToUint128(1)
	pending := tb.TransferFlags{Pending: true}.ToUint16()
	return func(k int) tb.Transfer {
		return tb.Transfer{ID: rawID(), DebitAccountID: acct(l, k), CreditAccountID: op, Amount: one,
			Timeout: secs, Ledger: l, Code: rawCode, Flags: pending}
	}
}

// sendHold sends hold alone in one CreateTransfers call and returns its
// decision.
func sendHold(c tb.Client, hold tb.Transfer) (bool, error) {
	res, err := c.CreateTransfers([]tb.Transfer{hold})
	switch {
	case err != nil:
		return false, err
	case len(res) != 1:
		return false, fmt.Errorf("create_transfers: %d results for 1 event", len(res))
	}
	return holdResult(res[0])
}

// holdResult is the decision of a hold's result: created admits, exceeds
// credits denies, anything else is an error.
func holdResult(r tb.CreateTransferResult) (bool, error) {
	switch r.Status {
	case tb.TransferCreated:
		return true, nil
	case tb.TransferExceedsCredits:
		return false, nil
	}
	return false, fmt.Errorf("create_transfers: %v", r.Status)
}

// rawLazySetup is the raw rows' floor on the arrivals: the work tblimit's
// lazy users do, by hand. Only the operator account exists before the
// clock starts. The first decision of a key creates its account
// (create_accounts of one account), then sends its limit's credit and its
// hold in one create_transfers of two transfers; every later decision of
// the key is its hold alone, as on the warm workloads. The keys seen are a
// concurrent set; a caller that meets a key another caller is still
// creating waits for that creation before its hold, which would fail
// without the account or its credit. So a first sight costs two calls in a
// row, and a known key one.
func rawLazySetup(c tb.Client, l uint32, cl cell) (*instance, error) {
	res, err := c.CreateAccounts([]tb.Account{rawOperator(l)})
	if err == nil && (len(res) != 1 || res[0].Status != tb.AccountCreated) {
		err = fmt.Errorf("%v", res)
	}
	if err != nil {
		return nil, fmt.Errorf("create_accounts: operator: %w", err)
	}
	hold := rawHolds(l, cl.window)
	first := func(k int) (bool, error) {
		res, err := c.CreateAccounts([]tb.Account{rawUser(l, k)})
		if err == nil && (len(res) != 1 || res[0].Status != tb.AccountCreated) {
			err = fmt.Errorf("%v", res)
		}
		if err != nil {
			return false, fmt.Errorf("create_accounts: user %d: %w", k, err)
		}
		ts, err := c.CreateTransfers([]tb.Transfer{rawCredit(l, k, cl.w.limit), hold(k)})
		if err == nil && len(ts) != 2 {
			err = fmt.Errorf("%d results for 2 events", len(ts))
		}
		if err == nil && ts[0].Status != tb.TransferCreated {
			err = fmt.Errorf("credit: %v", ts[0].Status)
		}
		if err != nil {
			return false, fmt.Errorf("create_transfers: user %d: %w", k, err)
		}
		return holdResult(ts[1])
	}
	var seen sync.Map // int -> *rawSight, for every key whose first decision has begun
	return &instance{allow: func(_ context.Context, k int) (bool, error) {
		v, ok := seen.Load(k)
		if !ok {
			s := &rawSight{done: make(chan struct{})}
			if v, ok = seen.LoadOrStore(k, s); !ok {
				admit, err := first(k)
				s.err = err
				close(s.done)
				return admit, err
			}
		}
		s := v.(*rawSight)
		<-s.done
		if s.err != nil {
			return false, fmt.Errorf("user %d was not created: %w", k, s.err)
		}
		return sendHold(c, hold(k))
	}}, nil
}

// rawSight is a key of rawLazySetup whose first decision has begun: done is
// closed once its account and credit exist, or err says why they do not.
type rawSight struct {
	done chan struct{}
	err  error
}

// chunks yields s in parts of at most n.
func chunks[E any](s []E, n int) func(yield func([]E) bool) {
	return func(yield func([]E) bool) {
		for len(s) > 0 {
			m := min(n, len(s))
			if !yield(s[:m]) {
				return
			}
			s = s[m:]
		}
	}
}
