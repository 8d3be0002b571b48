package ledger

import (
	"cmp"
	"context"
	"fmt"

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

// sight is a user of a lazy resource an op provisions, if need be, before
// its holds: the user's accounts are created, and its limit credited.
type sight struct {
	u     *user
	limit uint64 // the limit it is provisioned with: its plan's, else the default
	// The answer, handed over by the runner.
	accounts tb.CreateAccountStatus  // of its limit account
	credit   tb.CreateTransferResult // of its credit, if this op sent it
	credited bool                    // this op's batch carried its credit ahead of this op's holds
	acct     int                     // where its limit account is in the batch's accounts
	at       int                     // where its credit is in the batch's transfers, if credited
}

// sight records in o the users of parts not seen provisioned: lazy users
// this Client has not seen credited. Their resources are checked against
// the cluster first (once per Client), so that nothing is written for a
// resource the cluster does not hold as the caller says.
func (c *Client) sight(ctx context.Context, o *op, parts []Part) error {
	o.sights = o.sights[:0]
	if o.seen {
		return nil // and they stay so
	}
	for k, e := range o.deciding() {
		h := &parts[k]
		if !h.Resource.Lazy {
			continue
		}
		if e.u.seenProvisioned() {
			continue
		}
		if err := c.checkResource(ctx, h.Resource); err != nil {
			return err
		}
		if o.sights == nil {
			o.sights = o.sights1[:0]
		}
		o.sights = append(o.sights, sight{u: e.u, limit: h.provisionLimit()})
	}
	if len(o.sights) > 0 {
		o.merge = false // a merged transfer has no place for the credit ahead of it
	}
	return nil
}

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

// sightings gathers the accounts of the sights of a batch's ops into
// b.accounts, each once, and notes where each sight's limit account is.
func (b *batch) sightings(ops []*op) {
	clear(b.acctAt)
	clear(b.acctOf)
	b.accounts, b.acctOf = b.accounts[:0], b.acctOf[:0]
	for _, o := range ops {
		if o.local || len(o.sights) == 0 {
			continue
		}
		for i := range o.sights {
			s := &o.sights[i]
			for j, a := range userAccounts(s.u.res, s.u.key) {
				at, ok := b.acctAt[a.ID]
				if !ok {
					if b.acctAt == nil {
						b.acctAt = map[tb.Uint128]int{}
					}
					at = len(b.accounts)
					b.acctAt[a.ID] = at
					b.accounts = append(b.accounts, a)
					b.acctOf = append(b.acctOf, s.u)
				}
				if j == 0 {
					s.acct = at
				}
			}
		}
	}
}

// provisioned reads the answer to a batch's create_accounts: each sight
// learns its limit account's status, and an op whose accounts could not be
// made fails with an error, unsent.
func (b *batch) provisioned(ops []*op, res []tb.CreateAccountResult) {
	for i, r := range res {
		if !accountMade(r.Status) {
			if b.acctBad == nil {
				b.acctBad = map[*user]error{}
			}
			if u := b.acctOf[i]; b.acctBad[u] == nil {
				b.acctBad[u] = fmt.Errorf("ledger: provision %q: %w", u.key, accountStatusError(i, r.Status))
			}
		}
	}
	for _, o := range ops {
		for i := range o.sights {
			s := &o.sights[i]
			s.accounts = res[s.acct].Status
			if err := b.acctBad[s.u]; err != nil && o.err == nil {
				o.err = err
			}
		}
	}
	clear(b.acctBad)
}

// credit adds to b the credits of o's sights that the batch does not carry
// yet, ahead of o's chain.
func (b *batch) credit(o *op) {
	for i := range o.sights {
		s := &o.sights[i]
		t := provisionTransfer(s.u.res, s.u.key, s.limit)
		if b.credited[t.ID] {
			continue // an earlier op of the batch credits it, ahead of this one
		}
		if b.credited == nil {
			b.credited = map[tb.Uint128]bool{}
		}
		b.credited[t.ID] = true
		s.credited, s.at = true, len(b.send)
		b.send = append(b.send, t)
	}
}

// learnSights teaches the views of o's sights what the batch's answer
// says: a user credited (now or before) is provisioned, and one whose
// accounts and credit this batch made knows its limit and holds nothing
// else (its view is complete). It comes before o's holds are learnt, so
// that they are described against the limit.
func (c *Client) learnSights(o *op, now int64) {
	for _, s := range o.sights {
		if !s.credited {
			continue
		}
		cr := classifyCredit(s.credit.Status)
		if cr == creditFailed {
			continue // its hold fails as well, and decide says why
		}
		s.u.lock()
		v := &s.u.v
		v.Provisioned = true
		switch {
		case accountNew(s.accounts) && cr == creditNow:
			v.KnowLimit(s.limit, now)
		case cr == creditNow:
			// Credited with this limit, now or before: the limit it was
			// given, until a read says whether it changed since.
			v.AssumeLimit(s.limit)
		}
		s.u.mu.Unlock()
	}
}

// failure explains why o's deciding chain failed for a reason other than
// a limit. It returns the holds whose users are missing on a lazy resource
// (to be provisioned), or the error to return.
func (c *Client) failure(ctx context.Context, o *op, parts []Part) (lazy []int, err error) {
	res, start := o.decidingResults(), o.decidingStart()
	for i, s := range res {
		out := classify(s.Status)
		if o.explain != nil {
			if err := o.explain(&o.chain[start+i], out); err != nil {
				return nil, err
			}
		}
		switch out {
		case outReusedID:
			return nil, fmt.Errorf("%w: %s named a request with %s", ErrIDReused, o.name(), differs(s.Status))
		case outUnexpected:
			return nil, transferStatusError(i, s.Status)
		}
	}
	for k, e := range o.deciding() {
		h := parts[k]
		switch classify(o.res[e.i].Status) {
		case outNoUser:
			if !h.Resource.Lazy {
				return nil, c.missing(ctx, h.Resource, h.Request.User)
			}
			lazy = append(lazy, k)
		case outNoResource:
			return nil, fmt.Errorf("%w: no resource on ledger %d", ErrUnknownResource, h.Resource.Ledger)
		case outLinked:
			// A later hold of the chain was not reached: its user may be
			// missing too. Provisioning it again is harmless.
			if h.Resource.Lazy && !e.u.seenProvisioned() {
				lazy = append(lazy, k)
			}
		}
	}
	if len(lazy) == 0 || !anyNoUser(res) {
		return nil, fmt.Errorf("ledger: chain failed without a cause: %v", res)
	}
	return lazy, nil
}

func anyNoUser(res []tb.CreateTransferResult) bool {
	for _, s := range res {
		if classify(s.Status) == outNoUser {
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
