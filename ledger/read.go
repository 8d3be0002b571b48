package ledger

import (
	"context"
	"iter"
	"math"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Every read of more than one page goes through pages: an account's
// transfers (transferPages) and a ledger's accounts (accountPages).
//
// A reply holds min(limit, result_max) results while there are more, where
// result_max is what fits in a reply of the cluster's message size: 8189
// accounts or transfers with the 1 MiB of the clients' build (TigerBeetle's
// Operation.result_max; replies are not bound by the runtime batch size
// limit). Every page asked here is at most BatchMax, that same number, so a
// page shorter than asked is the last, and a short read costs one request.

// transferPages reads the transfers of f page by page, in f's order (the
// oldest first, or the newest with Reversed), asking size() for each page:
// at most BatchMax, and the caller can break once it has what it needs.
// It moves f's cursor, and f.Limit is the limit the page read was asked
// with (package conn may ask less than size() said): a page shorter than
// it is the last.
func (c *Client) transferPages(ctx context.Context, f *tb.AccountFilter, size func() uint32) iter.Seq2[[]tb.Transfer, error] {
	reversed := f.AccountFilterFlags().Reversed
	return pages(&f.TimestampMin, &f.TimestampMax, &f.Limit, reversed, size,
		func(want uint32) ([]tb.Transfer, error) { return c.conn.AccountTransfers(ctx, f, want) },
		func(t tb.Transfer) uint64 { return t.Timestamp })
}

// accountPages reads the accounts of f page by page, as transferPages does.
func (c *Client) accountPages(ctx context.Context, f tb.QueryFilter, size func() uint32) iter.Seq2[[]tb.Account, error] {
	reversed := f.QueryFilterFlags().Reversed
	return pages(&f.TimestampMin, &f.TimestampMax, &f.Limit, reversed, size,
		func(want uint32) ([]tb.Account, error) { return c.conn.QueryAccounts(ctx, &f, want) },
		func(a tb.Account) uint64 { return a.Timestamp })
}

// fullPages asks for a full batch every page.
func fullPages() uint32 { return BatchMax }

// pages is the one paging loop: fetch the page of [*lo, *hi] (0: no bound)
// that the cursor points at, yield it, move the cursor past it, and stop
// after a page shorter than the limit fetch asked (*limit), or at the end
// of the span. An error is yielded once, last.
func pages[R any](lo, hi *uint64, limit *uint32, reversed bool, size func() uint32,
	fetch func(want uint32) ([]R, error), stamp func(R) uint64) iter.Seq2[[]R, error] {
	return func(yield func([]R, error) bool) {
		for {
			got, err := fetch(size())
			if err != nil {
				yield(nil, err)
				return
			}
			if len(got) == 0 || !yield(got, nil) || len(got) < int(*limit) {
				return
			}
			last := stamp(got[len(got)-1])
			switch {
			case reversed && last <= max(*lo, 1):
				return // the next page would be empty, or with *hi 0, unbounded
			case reversed:
				*hi = last - 1
			case last == math.MaxUint64 || (*hi != 0 && last >= *hi):
				return
			default:
				*lo = last + 1
			}
		}
	}
}

// queryAccounts returns every account of f.
func (c *Client) queryAccounts(ctx context.Context, f tb.QueryFilter) ([]tb.Account, error) {
	return all(c.accountPages(ctx, f, fullPages))
}

// all returns every result of ps, or its error.
func all[R any](ps iter.Seq2[[]R, error]) ([]R, error) {
	var out []R
	for got, err := range ps {
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// lookupAccounts returns the accounts with ids that exist, in the order asked.
func (c *Client) lookupAccounts(ctx context.Context, ids []ID) ([]tb.Account, error) {
	u := make([]tb.Uint128, len(ids))
	for i, id := range ids {
		u[i] = id.tb()
	}
	return c.conn.LookupAccounts(ctx, u)
}
