package ledger

import (
	"context"
	"fmt"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Usage is a user's state on a resource.
type Usage struct {
	// Limit is the user's limit: units per window.
	Limit uint64
	// InFlight is how many units were taken within the last window and
	// have not returned yet.
	InFlight uint64
	// Available is Limit minus InFlight: what can be taken now.
	Available uint64
	// NextRelease is how long until the next units return, and
	// NextReleaseUnits how many return then (0 when nothing is in flight).
	NextRelease      time.Duration
	NextReleaseUnits uint64
	// ResetAfter is how long until every unit in flight has returned.
	ResetAfter time.Duration
}

// Inspect returns user key's limit, units in flight and when they return.
func (c *Client) Inspect(ctx context.Context, r Resource, key string) (Usage, error) {
	uid, b, err := c.account(ctx, r, key)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{Limit: b.Limit, InFlight: b.InFlight, Available: b.Available}
	if b.InFlight == 0 {
		return u, nil
	}
	now := uint64(c.now().UnixNano())
	flights, err := c.readFlights(ctx, uid, maxTimeout(r.Window), now, 1, true)
	if err != nil {
		return Usage{}, err
	}
	if len(flights) > 0 {
		next := flights[0].expires
		for _, f := range flights {
			if f.expires == next {
				u.NextReleaseUnits += f.amount
			}
		}
		u.NextRelease = time.Duration(next - now)
	}
	last, err := c.lastExpiry(ctx, uid, maxTimeout(r.Window), now)
	if err != nil {
		return Usage{}, err
	}
	u.ResetAfter = time.Duration(last - now)
	return u, nil
}

// account reads user key's limit account on r (key in its normal form):
// its ID and balance, or ErrUnknownUser.
func (c *Client) account(ctx context.Context, r Resource, key string) (ID, balance, error) {
	uid, key, err := userOf(r, key)
	if err != nil {
		return ID{}, balance{}, err
	}
	b, err := c.balance(ctx, r, uid, key)
	return uid, b, err
}

// userOf checks r and key, and returns the ID of user key's limit account
// on r and the key in its normal form.
func userOf(r Resource, key string) (ID, string, error) {
	if err := r.Validate(); err != nil {
		return ID{}, "", err
	}
	key, err := NormalizeKey(key)
	if err != nil {
		return ID{}, "", err
	}
	return UserID(r.Ledger, key), key, nil
}

// balance reads the balance of user key's limit account uid on r, or
// ErrUnknownUser.
func (c *Client) balance(ctx context.Context, r Resource, uid ID, key string) (balance, error) {
	a, ok, err := c.lookupAccount(ctx, uid)
	if err != nil {
		return balance{}, err
	}
	if !ok {
		return balance{}, fmt.Errorf("%w: %q on %s", ErrUnknownUser, key, r.Name)
	}
	return balanceOf(a)
}

// Flight is units in flight: taken, and not returned yet.
type Flight struct {
	// ID is the pending transfer that holds them.
	ID ID
	// Amount is how many units.
	Amount uint64
	// Taken and Returns are when they were taken and when they return, in
	// cluster time.
	Taken, Returns time.Time
	// Ref is the Request.Ref given when they were taken.
	Ref uint64
}

// Flights lists user key's units in flight on r, the ones that return first
// first, at most max of them (0: all).
func (c *Client) Flights(ctx context.Context, r Resource, key string, max int) ([]Flight, error) {
	uid, _, err := c.account(ctx, r, key)
	if err != nil {
		return nil, err
	}
	flights, err := c.readFlights(ctx, uid, maxTimeout(r.Window), uint64(c.now().UnixNano()), 0, true)
	if err != nil {
		return nil, err
	}
	if max > 0 && len(flights) > max {
		flights = flights[:max]
	}
	out := make([]Flight, len(flights))
	ids := make([]tb.Uint128, len(flights))
	for i, f := range flights {
		out[i] = Flight{ID: f.id, Amount: f.amount, Taken: time.Unix(0, int64(f.ts)), Returns: time.Unix(0, int64(f.expires))}
		ids[i] = f.id.tb()
	}
	if len(ids) > 0 {
		ts, err := c.conn.LookupTransfers(ctx, ids)
		if err != nil {
			return nil, err
		}
		refs := make(map[ID]uint64, len(ts))
		for _, t := range ts {
			refs[fromTB(t.ID)] = t.UserData64
		}
		for i := range out {
			out[i].Ref = refs[out[i].ID]
		}
	}
	return out, nil
}

// UserInfo is one user of a resource, as listed by Users.
type UserInfo struct {
	// ID is the user's account.
	ID ID
	// Key is the user's key: kept in the user's account (16 bytes at
	// most) or in name accounts beside it (longer keys); "" for a long key
	// provisioned by a version of tblimit that did not keep it.
	Key string
	// Limit, InFlight and Available are as in Usage.
	Limit, InFlight, Available uint64
}

// Users lists the users of r, oldest first.
func (c *Client) Users(ctx context.Context, r Resource) ([]UserInfo, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	as, err := c.queryAccounts(ctx, tb.QueryFilter{Ledger: r.Ledger, Code: codeUser})
	if err != nil {
		return nil, err
	}
	out := make([]UserInfo, 0, len(as))
	var unnamed []ID
	for _, a := range as {
		b, err := balanceOf(a)
		if err != nil {
			return nil, err
		}
		key := keyFromUserData(a.UserData128)
		if key != "" && UserID(r.Ledger, key) != fromTB(a.ID) {
			key = ""
		}
		if key == "" {
			unnamed = append(unnamed, fromTB(a.ID))
		}
		out = append(out, UserInfo{ID: fromTB(a.ID), Key: key, Limit: b.Limit, InFlight: b.InFlight, Available: b.Available})
	}
	long, err := c.longKeys(ctx, r.Ledger, unnamed, func(key string) ID { return UserID(r.Ledger, key) })
	if err != nil {
		return nil, err
	}
	for i := range out {
		if k, ok := long[out[i].ID]; ok {
			out[i].Key = k
		}
	}
	return out, nil
}

func keyFromUserData(u tb.Uint128) string {
	b := u.Bytes()
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	return string(b[:n])
}
