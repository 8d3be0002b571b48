package ledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/internal/view"
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

// flight is one pending transfer out of a user's account: units in flight.
type flight struct {
	id      ID
	amount  uint64
	ts      uint64 // cluster time it was created
	expires uint64 // cluster time it returns
	code    uint16
}

// holdsOf is what a view learns of flights: the holds a scan found.
func holdsOf(fs []flight) []view.Hold {
	hs := make([]view.Hold, len(fs))
	for i, f := range fs {
		hs[i] = view.Hold{ID: f.id, Amount: f.amount, Expires: f.expires}
	}
	return hs
}

// readFlights lists the pending transfers out of account uid that have not
// expired at cluster time now, ordered by when they return, reading pages
// from the oldest until it has found want units (0: all of them). Units
// posted by SetLimit are left out. Every unit in flight was created within
// the last window, or, for what a Client holds again on a remote cluster,
// within the last maxTimeout: callers that must see those (Inspect,
// SetLimit) pass maxTimeout(window) as the window.
//
// A hold is ended (posted or voided) by a later transfer, so when the scan
// stops before the end, a hold it counts on may have been ended since.
// With exact, such holds are checked by looking up the IDs their post or
// void would have (every post and void this package sends has an ID derived
// from the hold's: see resolutionIDs). Without, the list may include them:
// their units came back already, so what it says returns by some time
// returns by then or earlier. The estimates of a decision (RetryAfter, how
// long a drained user stays denied locally) take that cheaper answer: it
// can make them early, never late.
func (c *Client) readFlights(ctx context.Context, uid ID, window time.Duration, now uint64, want uint64, exact bool) ([]flight, error) {
	f := tb.AccountFilter{
		AccountID:    uid.tb(),
		TimestampMin: now - min(now, uint64(window)) + 1,
		Flags:        tb.AccountFilterFlags{Debits: true}.ToUint32(),
	}
	var out []flight
	done := map[ID]bool{}    // holds ended by a post or void
	checked := map[ID]bool{} // holds whose post and void were looked up
	size := func() uint32 { return pageSize(want - min(want, liveUnits(out, done))) }
	for got, err := range c.transferPages(ctx, &f, size) {
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
				}
			}
		}
		if len(got) < int(f.Limit) {
			break // the last page: every post and void was seen
		}
		if want > 0 && liveUnits(out, done) >= want {
			// Enough units are held, unless a later page ends some.
			if !exact {
				break
			}
			enough, err := c.stillHeld(ctx, out, done, checked, want)
			if err != nil {
				return nil, err
			}
			if enough {
				break
			}
		}
	}
	out = slices.DeleteFunc(out, func(fl flight) bool { return done[fl.id] })
	sortFlights(out)
	return out, nil
}

// maxTimeout is the longest timeout of a hold on a resource of this window:
// the window, or a second more for what a Client holds again on a remote
// cluster (a lease's or a lowered limit's units, rounded up).
func maxTimeout(window time.Duration) time.Duration { return window + time.Second }

func sortFlights(fs []flight) {
	slices.SortFunc(fs, func(a, b flight) int {
		if a.expires != b.expires {
			return cmp.Compare(a.expires, b.expires)
		}
		return cmp.Compare(a.ts, b.ts)
	})
}

func liveUnits(fs []flight, done map[ID]bool) uint64 {
	var n uint64
	for _, f := range fs {
		if !done[f.id] {
			n += f.amount
		}
	}
	return n
}

// stillHeld finds out whether the holds read so far were ended by a post
// or void not read yet: it looks up, in one batch, the IDs those would have
// for every hold not checked before, marks the holds found ended in done,
// and reports whether those left make up want units.
func (c *Client) stillHeld(ctx context.Context, fs []flight, done, checked map[ID]bool, want uint64) (bool, error) {
	var ids []tb.Uint128
	for _, f := range fs {
		if done[f.id] || checked[f.id] {
			continue
		}
		checked[f.id] = true
		for _, id := range resolutionIDs(f.id) {
			ids = append(ids, id.tb())
		}
	}
	if len(ids) > 0 {
		ended, err := c.conn.LookupTransfers(ctx, ids)
		if err != nil {
			return false, err
		}
		for _, t := range ended {
			done[fromTB(t.PendingID)] = true
		}
	}
	return liveUnits(fs, done) >= want, nil
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

func sortAccounts(as []tb.Account) {
	slices.SortFunc(as, func(a, b tb.Account) int { return cmp.Compare(a.Timestamp, b.Timestamp) })
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
	read, want := 0, uint32(16)
	size := func() uint32 {
		w := want
		read, want = read+1, min(want*4, BatchMax)
		return w
	}
	for got, err := range c.transferPages(ctx, &f, size) {
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
		if read >= 4 && len(got) == int(f.Limit) {
			// Whatever is older than the last transfer read returns
			// before that one's timestamp plus the longest timeout.
			return max(last, got[len(got)-1].Timestamp+longest), nil
		}
	}
	return last, nil
}
