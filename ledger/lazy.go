package ledger

import (
	"context"
	"fmt"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// failure explains why o's deciding chain failed for a reason other than
// a limit. It returns the holds whose users are missing on a lazy resource
// (to be provisioned), or the error to return.
func (c *Client) failure(ctx context.Context, o *op, parts []Part) (lazy []int, err error) {
	res, start := o.decision(), o.decisionStart()
	for i, s := range res {
		out := classify(s.Status)
		if o.explain != nil {
			if err := o.explain(&o.chain[start+i], out); err != nil {
				return nil, err
			}
		}
		switch out {
		case outReusedID:
			return nil, fmt.Errorf("%w: %s (%s)", ErrIDReused, o.name(), s.Status)
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
			e.u.lock()
			known := e.u.v.limitKnown
			e.u.mu.Unlock()
			if h.Resource.Lazy && !known {
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
// their resource's default limit.
func (c *Client) provisionLazy(ctx context.Context, parts []Part, idx []int) error {
	for _, i := range idx {
		h := parts[i]
		limit := h.Resource.DefaultLimit
		if h.Request.Limit != 0 {
			limit = h.Request.Limit
		}
		if err := c.provision(ctx, h.Resource, []UserLimit{{Key: h.Request.User, Limit: limit}}, false); err != nil {
			return err
		}
	}
	return nil
}

// uncredited returns the holds of a denied chain that came to their
// user's account before its limit did: the account of a lazy user is
// created, then credited (two requests), and a hold of another caller or
// process that lands between the two is refused for want of credits that
// were on their way. Such a denial is no denial: the caller provisions
// (idempotently) and decides again. It is told by the user's provisioning
// transfer, missing or stamped after the hold. Only users whose limit this
// Client does not know are looked at: after their first decisions, never.
func (c *Client) uncredited(ctx context.Context, o *op, parts []Part) ([]int, error) {
	var idx, out []int
	var ids []tb.Uint128
	var at []uint64
	for k, e := range o.deciding() {
		h := parts[k]
		if !h.Resource.Lazy || e.i >= len(o.res) || classify(o.res[e.i].Status) != outDenied {
			continue // a merged op has no result of its own (see coalesce)
		}
		held := o.res[e.i].Timestamp
		e.u.mu.Lock()
		known, credited := e.u.v.limitKnown, e.u.creditedAt()
		e.u.mu.Unlock()
		switch {
		case credited > held:
			out = append(out, k) // this Client credited it, after the hold came
		case !known:
			idx = append(idx, k)
			ids = append(ids, provisionID(h.Resource.Ledger, h.Request.User).tb())
			at = append(at, held)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	ts, err := c.conn.LookupTransfers(ctx, ids)
	if err != nil {
		return nil, err
	}
	credited := map[tb.Uint128]uint64{}
	for _, t := range ts {
		credited[t.ID] = t.Timestamp
	}
	for j, i := range idx {
		if when, ok := credited[ids[j]]; !ok || when > at[j] {
			out = append(out, i)
		}
	}
	return out, nil
}

// missing explains why user key has no account on r: there is no such
// resource, or no such user.
func (c *Client) missing(ctx context.Context, r Resource, key string) error {
	if _, err := c.Resource(ctx, r.Ledger); err != nil {
		return err
	}
	return &UnknownUserError{Resource: r, User: key}
}
