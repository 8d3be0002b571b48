package ledger

import (
	"context"
	"fmt"
	"slices"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// balance is a user's limit account read as a limit: credits minus posted
// debits is the limit, pending debits are the units in flight.
type balance struct {
	Limit     uint64
	InFlight  uint64
	Available uint64
}

func balanceOf(a tb.Account) (balance, error) {
	credits, ok1 := u64(a.CreditsPosted)
	debits, ok2 := u64(a.DebitsPosted)
	pending, ok3 := u64(a.DebitsPending)
	if !ok1 || !ok2 || !ok3 || debits > credits || pending > credits-debits {
		return balance{}, fmt.Errorf("ledger: account %s on ledger %d does not hold a limit (credits %s, debits %s posted, %s pending)",
			fromTB(a.ID), a.Ledger, a.CreditsPosted, a.DebitsPosted, a.DebitsPending)
	}
	limit := credits - debits
	return balance{Limit: limit, InFlight: pending, Available: limit - pending}, nil
}

// u64 returns v if it fits in 64 bits.
func u64(v tb.Uint128) (uint64, bool) {
	lo, hi := v.Uint64()
	return lo, hi == 0
}

// flight is one pending transfer out of a user's account: units in flight.
type flight struct {
	id      ID
	amount  uint64
	ts      uint64 // cluster time it was created
	expires uint64 // cluster time it returns
	code    uint16
}

// inFlight lists the pending transfers out of account uid that have not
// expired at cluster time now, ordered by when they return, reading pages
// from the oldest until it has found want units (0: all of them). Units
// posted by SetLimit are left out. Every unit in flight was created within
// the last window, since no timeout is longer than the window.
func (c *Client) inFlight(ctx context.Context, uid ID, window time.Duration, now uint64, want uint64) ([]flight, error) {
	f := tb.AccountFilter{
		AccountID:    uid.tb(),
		TimestampMin: now - min(now, uint64(window)) + 1,
		Flags:        tb.AccountFilterFlags{Debits: true}.ToUint32(),
	}
	var out []flight
	var found uint64
	done := map[ID]bool{}
	for {
		got, err := page(ctx, c, &f, &f.Limit, pageSize(want-min(want, found)), c.tb.GetAccountTransfers)
		if err != nil {
			return nil, err
		}
		for _, t := range got {
			flags := t.TransferFlags()
			switch {
			case flags.PostPendingTransfer || flags.VoidPendingTransfer:
				done[fromTB(t.PendingID)] = true
			case flags.Pending:
				amount, _ := u64(t.Amount)
				exp := t.Timestamp + uint64(t.Timeout)*uint64(time.Second)
				if exp > now {
					out = append(out, flight{id: fromTB(t.ID), amount: amount, ts: t.Timestamp, expires: exp, code: t.Code})
					found += amount
				}
			}
		}
		if len(got) == 0 || (want > 0 && found >= want) {
			break
		}
		f.TimestampMin = got[len(got)-1].Timestamp + 1
	}
	out = slices.DeleteFunc(out, func(fl flight) bool { return done[fl.id] })
	slices.SortFunc(out, func(a, b flight) int {
		if a.expires != b.expires {
			return cmpU64(a.expires, b.expires)
		}
		return cmpU64(a.ts, b.ts)
	})
	return out, nil
}

// pageSize is how many transfers to ask for to find want units: at least a
// few, at most a full batch.
func pageSize(want uint64) uint32 {
	const minPage = 32
	switch {
	case want == 0 || want >= BatchMax:
		return BatchMax
	case want < minPage:
		return minPage
	}
	return uint32(want)
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// releaseAfter returns how long after cluster time now at least need units
// will have returned, from flights ordered by return; -1 if they never do.
func releaseAfter(flights []flight, now, need uint64) time.Duration {
	var got uint64
	for _, f := range flights {
		got += f.amount
		if got >= need {
			return time.Duration(f.expires - now)
		}
	}
	return -1
}

func sortAccounts(as []tb.Account) {
	slices.SortFunc(as, func(a, b tb.Account) int { return cmpU64(a.Timestamp, b.Timestamp) })
}
