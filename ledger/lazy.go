package ledger

import (
	"cmp"
	"context"

	"github.com/tblimit/tblimit/ledger/internal/status"
	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Users of a lazy resource are provisioned by their first decisions, in
// the pipeline. A decision whose user this Client has not seen provisioned
// carries a sight: the user's accounts, which the batch's runner creates
// in one create_accounts request for every sight of the batch, and the
// credit of its limit, which goes in the batch's create_transfers just
// before the user's first hold. A first sight so costs one request more
// than a known user, shared by every first sight of its batch, and never
// a hold that fails for want of an account.
//
// Both are idempotent (the accounts' IDs and the credit's are derived from
// the key), so processes that meet a new key at once provision it once:
// whichever credit comes first is the one, the others exist. A hold never
// comes before its credit: a process sends its own credit ahead of its
// hold, in one request, until it has seen the user credited. The credit is
// not linked to the hold: TigerBeetle fails a chain in which an event
// exists, and the credit of a user another process provisioned exists.
//
// We considered sending the hold first and provisioning when it fails for
// want of an account, as the first version did: a known key costs
// nothing extra, but a first sight then costs four round trips, made one
// after the other by its caller outside the pipeline, and a gateway's keys
// are mostly first sights. A sight costs a known key nothing, and a
// restarted process one shared request per batch until it has seen its
// users again.

// provisionLimit is the limit a lazy user is provisioned with by h: its
// plan's (Request.Limit), else the resource's default.
func (h *Part) provisionLimit() uint64 { return cmp.Or(h.Request.Limit, h.Resource.DefaultLimit) }

// seenProvisioned reports whether this Client has seen u's account
// credited (see sight).
func (u *user) seenProvisioned() bool {
	u.mu.Lock() // not lock: a look changes nothing
	defer u.mu.Unlock()
	return u.v.Provisioned
}

// userAccounts are the accounts of user key on r: its limit account (first)
// and, for money, its account on the currency ledger, each with the name
// accounts of a long key.
func userAccounts(r Resource, key string) []tb.Account {
	out := []tb.Account{userAccount(r, key)}
	out = append(out, nameAccounts(r.Ledger, UserID(r.Ledger, key), key)...)
	if r.Kind == KindMoney {
		out = append(out, currencyAccount(r.Currency, key))
		out = append(out, nameAccounts(r.Currency, CurrencyUserID(r.Currency, key), key)...)
	}
	return out
}

func anyNoUser(res []tb.CreateTransferResult) bool {
	for _, s := range res {
		if status.Classify(s.Status) == status.NoUser {
			return true
		}
	}
	return false
}

// provisionLazy provisions the users of the lazy holds listed in idx with
// their resource's default limit, outside the pipeline: for a user this
// Client took for provisioned whose account is missing (a cluster formatted
// anew under a long-lived Client), which a sight does not cover.
func (c *Client) provisionLazy(ctx context.Context, parts []Part, idx []int) error {
	for _, i := range idx {
		h := parts[i]
		if err := c.provision(ctx, h.Resource, []UserLimit{{Key: h.Request.User, Limit: h.provisionLimit()}}, false); err != nil {
			return err
		}
	}
	return nil
}

// missing explains why user key has no account on r: there is no such
// resource, or no such user.
func (c *Client) missing(ctx context.Context, r Resource, key string) error {
	if _, err := c.Resource(ctx, r.Ledger); err != nil {
		return err
	}
	return &UnknownUserError{Resource: r, User: key}
}
