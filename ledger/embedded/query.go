package embedded

import (
	"sort"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Filter flags (tb.AccountFilterFlags, tb.QueryFilterFlags).
const (
	ffDebits          = 1 << 0
	ffCredits         = 1 << 1
	ffReversed        = 1 << 2
	ffAccountPadding  = ^uint32(1<<3 - 1)
	qfReversed        = 1 << 0
	qfPadding         = ^uint32(1<<1 - 1)
	accountFilterSize = 58
)

func (s *state) account(i uint32) tb.Account {
	var out tb.Account
	s.putAccount(&out, i)
	return out
}

// putAccount fills *out, which must be zero, with account i.
func (s *state) putAccount(out *tb.Account, i uint32) {
	a := s.accounts.at(i)
	out.ID = a.id
	a.dPend.Put(&out.DebitsPending)
	a.dPost.Put(&out.DebitsPosted)
	a.cPend.Put(&out.CreditsPending)
	a.cPost.Put(&out.CreditsPosted)
	out.UserData128 = a.ud128
	out.UserData64 = a.ud64
	out.UserData32 = a.ud32
	out.Ledger = a.ledger
	out.Code = a.code
	out.Flags = a.flags
	out.Timestamp = a.ts
}

// transferID returns the ID of transfer i.
func (s *state) transferID(i uint32) tb.Uint128 {
	if s.st != nil {
		return s.transfers.id(i)
	}
	return s.transferIDs.key(i)
}

func (s *state) transfer(i uint32) tb.Transfer {
	x := s.transfers.at(i)
	dr := s.accounts.at(x.dr)
	t := tb.Transfer{
		ID:              s.transferID(i),
		DebitAccountID:  dr.id,
		CreditAccountID: s.accounts.at(x.cr).id,
		Amount:          x.amount.TB(),
		UserData128:     s.transfers.userData128(i),
		UserData64:      x.ud64,
		UserData32:      x.ud32,
		Timeout:         x.timeout,
		Ledger:          dr.ledger,
		Code:            x.code,
		Flags:           x.flags & tfUserFlagsMask,
		Timestamp:       x.ts,
	}
	if x.flags&tfPostOrVoid != 0 {
		t.PendingID = s.transferID(x.pending)
	}
	return t
}

// lookupAccounts appends to out, which has room for them, the accounts
// with the given IDs. An ID repeated right after itself (a hot account in a
// batch) is answered with a copy, without looking it up again.
func (s *state) lookupAccounts(ids []tb.Uint128, out []tb.Account) []tb.Account {
	found := false
	for k, id := range ids {
		if k > 0 && id == ids[k-1] {
			if found {
				out = append(out, out[len(out)-1])
			}
			continue
		}
		var i uint32
		if i, found = s.findAccount(id); found {
			out = append(out, tb.Account{})
			s.putAccount(&out[len(out)-1], i)
		}
	}
	return out
}

// lookupTransfers appends to out, which has room for them, the transfers
// with the given IDs.
func (s *state) lookupTransfers(ids []tb.Uint128, out []tb.Transfer) []tb.Transfer {
	for _, id := range ids {
		if i, ok := s.transferIDs.find(id); ok {
			out = append(out, s.transfer(i))
		}
	}
	return out
}

// timestampRange turns a filter's bounds (zero: unbounded) into an inclusive
// range, or reports the filter invalid: a bound past the largest timestamp
// makes the whole filter invalid, as in TigerBeetle, rather than being
// clipped.
func timestampRange(minTs, maxTs uint64) (lo, hi uint64, ok bool) {
	if (minTs != 0 && !validTimestamp(minTs)) || (maxTs != 0 && !validTimestamp(maxTs)) ||
		(maxTs != 0 && minTs > maxTs) {
		return 0, 0, false
	}
	lo, hi = minTs, maxTs
	if lo == 0 {
		lo = timestampMin
	}
	if hi == 0 {
		hi = timestampMax
	}
	return lo, hi, true
}

// accountFilterValid reports whether TigerBeetle would run the scan at all;
// an invalid filter gives an empty result.
func accountFilterValid(f *tb.AccountFilter) bool {
	return f.AccountID != tbZero && f.AccountID != tbMaxInt &&
		f.Limit != 0 &&
		f.Flags&(ffDebits|ffCredits) != 0 &&
		f.Flags&ffAccountPadding == 0 &&
		f.Reserved == [accountFilterSize]uint8{}
}

// accountTransfers returns the arena indexes of the transfers that match f,
// in the requested order, at most f.Limit.
func (s *state) accountTransfers(f *tb.AccountFilter) (*acct, []uint32) {
	if !accountFilterValid(f) {
		return nil, nil
	}
	lo, hi, ok := timestampRange(f.TimestampMin, f.TimestampMax)
	if !ok {
		return nil, nil
	}
	ai, ok := s.findAccount(f.AccountID)
	if !ok {
		return nil, nil
	}
	s.loadLists(ai)
	a := s.accounts.at(ai)
	// The entries [dFrom, dTo) of a.debits and [cFrom, cTo) of a.credits.
	var dFrom, dTo, cFrom, cTo int
	if f.Flags&ffDebits != 0 {
		dFrom, dTo = s.clip(&a.debits, lo, hi)
	}
	if f.Flags&ffCredits != 0 {
		cFrom, cTo = s.clip(&a.credits, lo, hi)
	}
	reversed := f.Flags&ffReversed != 0
	limit := int(f.Limit)
	var out []uint32
	// Merge the two ascending lists (indexes are in timestamp order).
	i, j := dFrom, cFrom
	if reversed {
		i, j = dTo-1, cTo-1
	}
	for len(out) < limit {
		var idx uint32
		if reversed {
			switch {
			case i >= dFrom && (j < cFrom || a.debits.at(i) > a.credits.at(j)):
				idx, i = a.debits.at(i), i-1
			case j >= cFrom:
				idx, j = a.credits.at(j), j-1
			default:
				return a, out
			}
		} else {
			switch {
			case i < dTo && (j >= cTo || a.debits.at(i) < a.credits.at(j)):
				idx, i = a.debits.at(i), i+1
			case j < cTo:
				idx, j = a.credits.at(j), j+1
			default:
				return a, out
			}
		}
		x := s.transfers.at(idx)
		if (f.UserData128 != tbZero && s.transfers.userData128(idx) != f.UserData128) ||
			(f.UserData64 != 0 && x.ud64 != f.UserData64) ||
			(f.UserData32 != 0 && x.ud32 != f.UserData32) ||
			(f.Code != 0 && x.code != f.Code) {
			continue
		}
		out = append(out, idx)
	}
	return a, out
}

// clip returns the range [from, to) of an ascending list of transfer
// indexes whose timestamps lie in [lo, hi] (from >= to when there are none).
func (s *state) clip(list *idxList, lo, hi uint64) (from, to int) {
	from = sort.Search(list.len(), func(k int) bool { return s.transfers.at(list.at(k)).ts >= lo })
	to = sort.Search(list.len(), func(k int) bool { return s.transfers.at(list.at(k)).ts > hi })
	return from, to
}

func (s *state) getAccountTransfers(f *tb.AccountFilter) []tb.Transfer {
	_, idxs := s.accountTransfers(f)
	out := make([]tb.Transfer, len(idxs))
	for k, i := range idxs {
		out[k] = s.transfer(i)
	}
	return out
}

func (s *state) getAccountBalances(f *tb.AccountFilter) []tb.AccountBalance {
	if !accountFilterValid(f) {
		return make([]tb.AccountBalance, 0)
	}
	if ai, ok := s.findAccount(f.AccountID); !ok || s.accounts.at(ai).flags&afHistory == 0 {
		return make([]tb.AccountBalance, 0)
	}
	a, idxs := s.accountTransfers(f)
	out := make([]tb.AccountBalance, 0, len(idxs))
	for _, i := range idxs {
		k := sort.Search(a.history.len(), func(k int) bool { return a.history.at(k).xfer >= i })
		if k == a.history.len() || a.history.at(k).xfer != i {
			continue // unreachable: every transfer of a history account has an entry
		}
		h := a.history.at(k)
		out = append(out, tb.AccountBalance{
			DebitsPending:  h.dPend.TB(),
			DebitsPosted:   h.dPost.TB(),
			CreditsPending: h.cPend.TB(),
			CreditsPosted:  h.cPost.TB(),
			Timestamp:      s.transfers.at(i).ts,
		})
	}
	return out
}

func queryFilterValid(f *tb.QueryFilter) bool {
	return f.Limit != 0 && f.Flags&qfPadding == 0 && f.Reserved == [6]uint8{}
}

func (s *state) queryAccounts(f *tb.QueryFilter) []tb.Account {
	out := make([]tb.Account, 0)
	if !queryFilterValid(f) {
		return out
	}
	lo, hi, ok := timestampRange(f.TimestampMin, f.TimestampMax)
	if !ok {
		return out
	}
	// Accounts are stored in timestamp order.
	from := sort.Search(int(s.accounts.n), func(k int) bool { return s.accounts.at(uint32(k)).ts >= lo })
	to := sort.Search(int(s.accounts.n), func(k int) bool { return s.accounts.at(uint32(k)).ts > hi })
	match := func(a *acct) bool {
		return (f.UserData128 == tbZero || a.ud128 == f.UserData128) &&
			(f.UserData64 == 0 || a.ud64 == f.UserData64) &&
			(f.UserData32 == 0 || a.ud32 == f.UserData32) &&
			(f.Ledger == 0 || a.ledger == f.Ledger) &&
			(f.Code == 0 || a.code == f.Code)
	}
	for n := 0; n < to-from && len(out) < int(f.Limit); n++ {
		k := from + n
		if f.Flags&qfReversed != 0 {
			k = to - 1 - n
		}
		if match(s.accounts.at(uint32(k))) {
			out = append(out, s.account(uint32(k)))
		}
		if n%chunkSize == chunkSize-1 {
			s.shed()
		}
	}
	return out
}

func (s *state) queryTransfers(f *tb.QueryFilter) []tb.Transfer {
	out := make([]tb.Transfer, 0)
	if !queryFilterValid(f) {
		return out
	}
	lo, hi, ok := timestampRange(f.TimestampMin, f.TimestampMax)
	if !ok {
		return out
	}
	n := int(s.transfers.n)
	from := sort.Search(n, func(k int) bool { return s.transfers.at(uint32(k)).ts >= lo })
	to := sort.Search(n, func(k int) bool { return s.transfers.at(uint32(k)).ts > hi })
	for c := 0; c < to-from && len(out) < int(f.Limit); c++ {
		k := uint32(from + c)
		if f.Flags&qfReversed != 0 {
			k = uint32(to - 1 - c)
		}
		x := s.transfers.at(k)
		if (f.UserData128 == tbZero || s.transfers.userData128(k) == f.UserData128) &&
			(f.UserData64 == 0 || x.ud64 == f.UserData64) &&
			(f.UserData32 == 0 || x.ud32 == f.UserData32) &&
			(f.Ledger == 0 || s.accounts.at(x.dr).ledger == f.Ledger) &&
			(f.Code == 0 || x.code == f.Code) {
			out = append(out, s.transfer(k))
		}
		if c%chunkSize == chunkSize-1 {
			s.shed()
		}
	}
	return out
}
