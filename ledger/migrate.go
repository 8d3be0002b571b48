package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tblimit/tblimit/ledger/internal/status"
	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// A resource's definition (window, default limit) cannot change: it lives
// in an immutable account. To move to another, create it on a new ledger
// and Migrate the users, which loses nothing in flight; see Migrate.

// Migrated is what Migrate did for one user.
type Migrated struct {
	// Key is the user's key.
	Key string
	// Limit is its limit on the new resource.
	Limit uint64
	// Carried counts the holds carried over by this call (an earlier call
	// carried the others); CarriedUnits their units.
	Carried      int
	CarriedUnits uint64
}

// Migrate moves user key from resource from to resource to: the user gets
// an account on to with limit (0: to's default), and the units it holds on
// from are carried over, as pending transfers on to that return when the
// units return on from (to the second, never earlier). So a window of to
// counts the units from admitted within it: nothing in flight is lost.
// Carried holds are named after the holds they carry, so Migrate may run
// again (from any process) and carries only what was taken since; run it
// once before the callers move to to, and once after, for what they took
// on from meanwhile. A user holding more on from than its new limit has
// the holds that return last carried, up to the limit: the rest return on
// from as they would have, and no window of to holds more than the larger
// of the two limits, as when a limit is lowered (see SetLimit). from and
// to must be resources of one kind, on other ledgers.
func (c *Client) Migrate(ctx context.Context, from, to Resource, key string, limit uint64) (Migrated, error) {
	switch {
	case from.Ledger == to.Ledger:
		return Migrated{}, fmt.Errorf("%w: migrate %s to itself", ErrInvalidResource, from.Name)
	case from.Kind != to.Kind:
		return Migrated{}, fmt.Errorf("%w: migrate %s (%s) to %s (%s): not one kind", ErrInvalidResource, from.Name, from.Kind, to.Name, to.Kind)
	}
	if err := c.checkResource(ctx, to); err != nil {
		return Migrated{}, err
	}
	key, err := NormalizeKey(key)
	if err != nil {
		return Migrated{}, err
	}
	if limit == 0 {
		limit = to.DefaultLimit
	}
	flights, err := c.Flights(ctx, from, key, 0)
	if err != nil {
		return Migrated{}, err
	}
	m := Migrated{Key: key, Limit: limit}
	if err := c.Provision(ctx, to, UserLimit{Key: key, Limit: limit}); err != nil {
		return m, err
	}
	m.Carried, m.CarriedUnits, err = c.carry(ctx, to, key, flights)
	return m, err
}

// carry creates on to, for user key, holds for flights (from another
// resource) that an earlier call did not carry, each returning when its
// flight returns, the latest first, as far as the user's available units
// on to allow.
func (c *Client) carry(ctx context.Context, to Resource, key string, flights []Flight) (n int, units uint64, err error) {
	now := c.now()
	live := returnAfter(flights, now)
	if len(live) == 0 {
		return 0, 0, nil
	}
	slices.SortFunc(live, func(a, b Flight) int { return b.Returns.Compare(a.Returns) }) // the latest first
	left, err := c.uncarried(ctx, to, live)
	if err != nil {
		return 0, 0, err
	}
	u, err := c.Inspect(ctx, to, key) // counts what was carried already
	if err != nil {
		return 0, 0, err
	}
	ts := carries(to, key, left, u.Available, now)
	if len(ts) == 0 {
		return 0, 0, nil
	}
	res, err := c.conn.CreateTransfers(ctx, ts)
	if err != nil {
		return 0, 0, err
	}
	n, units, err = carried(key, ts, res)
	c.users.forget(to.Ledger, key) // units in flight this Client did not take
	return n, units, err
}

// returnAfter returns the flights that return after now.
func returnAfter(flights []Flight, now time.Time) []Flight {
	live := flights[:0:0]
	for _, f := range flights {
		if f.Returns.After(now) {
			live = append(live, f)
		}
	}
	return live
}

// carryID is the ID of the hold that carries flight f to resource to.
func carryID(to Resource, f Flight) tb.Uint128 {
	return derive(roleCarry, to.Ledger, string(f.ID[:])).tb()
}

// uncarried returns the flights that no hold on to carries yet, in their
// order, from one lookup of their carrying holds.
func (c *Client) uncarried(ctx context.Context, to Resource, flights []Flight) ([]Flight, error) {
	ids := make([]tb.Uint128, len(flights))
	for i, f := range flights {
		ids[i] = carryID(to, f)
	}
	found, err := c.conn.LookupTransfers(ctx, ids)
	if err != nil {
		return nil, err
	}
	done := map[tb.Uint128]bool{}
	for _, t := range found {
		done[t.ID] = true
	}
	var left []Flight
	for _, f := range flights {
		if !done[carryID(to, f)] {
			left = append(left, f)
		}
	}
	return left, nil
}

// carries returns the holds on to that carry flights of user key at now,
// in their order, within budget units: each a pending transfer that
// returns, to the second, when its flight does (never earlier).
func carries(to Resource, key string, flights []Flight, budget uint64, now time.Time) []tb.Transfer {
	var ts []tb.Transfer
	for _, f := range flights {
		if budget == 0 {
			break
		}
		amount := min(f.Amount, budget)
		budget -= amount
		secs := uint32(min((f.Returns.Sub(now)+time.Second-1)/time.Second, time.Duration(1<<32-1)))
		ts = append(ts, tb.Transfer{
			ID:              carryID(to, f),
			DebitAccountID:  UserID(to.Ledger, key).tb(),
			CreditAccountID: OperatorID(to.Ledger).tb(),
			Amount:          tb.ToUint128(amount),
			UserData64:      f.Ref,
			Timeout:         secs,
			Ledger:          to.Ledger,
			Code:            codeCarry,
			Flags:           tb.TransferFlags{Pending: true}.ToUint16(),
		})
	}
	return ts
}

// carried counts the holds ts that res says were carried, and their units;
// a hold another process carried, or whose room it took, at once is no
// error.
func carried(key string, ts []tb.Transfer, res []tb.CreateTransferResult) (n int, units uint64, err error) {
	var errs []error
	for i, s := range res {
		switch carried, raced := status.ClassifyCarry(s.Status); {
		case carried:
			n++
			amount, _ := u64(ts[i].Amount)
			units += amount
		case raced:
			// Another process carried or took them at once: as far as room goes.
		default:
			errs = append(errs, fmt.Errorf("ledger: carry a hold of %q: %w", key, transferStatusError(i, s.Status)))
		}
	}
	return n, units, errors.Join(errs...)
}
