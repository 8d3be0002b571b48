package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
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
// timeout = window, sent alone in one CreateTransfers call.
func rawSetup(c tb.Client, l uint32, cl cell) (*instance, error) {
	const code = 10
	users := cl.w.users
	accounts := make([]tb.Account, 0, users+1)
	accounts = append(accounts, tb.Account{ID: acct(l, -1), Ledger: l, Code: code})
	for k := range users {
		accounts = append(accounts, tb.Account{ID: acct(l, k), Ledger: l, Code: code,
			Flags: tb.AccountFlags{DebitsMustNotExceedCredits: true}.ToUint16()})
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
		credits[k] = tb.Transfer{ID: u128(uint64(k)+1, uint64(l)|1<<40), DebitAccountID: acct(l, -1),
			CreditAccountID: acct(l, k), Amount: tb.ToUint128(cl.w.limit), Ledger: l, Code: code}
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
	secs := uint32(cl.window / time.Second)
	op := acct(l, -1)
	one := tb.ToUint128(1)
	pending := tb.TransferFlags{Pending: true}.ToUint16()
	return &instance{allow: func(_ context.Context, k int) (bool, error) {
		res, err := c.CreateTransfers([]tb.Transfer{{
			ID: rawID(), DebitAccountID: acct(l, k), CreditAccountID: op, Amount: one,
			Timeout: secs, Ledger: l, Code: code, Flags: pending,
		}})
		switch {
		case err != nil:
			return false, err
		case len(res) != 1:
			return false, fmt.Errorf("create_transfers: %d results for 1 event", len(res))
		case res[0].Status == tb.TransferCreated:
			return true, nil
		case res[0].Status == tb.TransferExceedsCredits:
			return false, nil
		}
		return false, fmt.Errorf("create_transfers: %v", res[0].Status)
	}}, nil
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
