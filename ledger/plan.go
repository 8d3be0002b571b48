package ledger

import (
	"context"
	"errors"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// plan gives user u the limit h asks for (Request.Limit), when it is known
// to differ: SetLimit, once, while the user's other calls wait. A user whose
// limit this Client does not know is read first. A lazy user this Client has
// not seen provisioned is left to the decision, which provisions it with the
// plan's limit; if it existed already, with another, its plan is given it
// from its next decision, once its limit is known.
func (c *Client) plan(ctx context.Context, u *user, h *Part) error {
	want := h.Request.Limit
	if want == 0 {
		return nil
	}
	if dn := u.denial.Load(); dn != nil && dn.under(want) {
		return nil // nothing changed the user since its view decided dn
	}
	for {
		u.mu.Lock() // not lock: a check changes nothing
		if ch := u.planning(); ch != nil {
			u.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return unavailable(context.Cause(ctx))
			}
		}
		if u.hasLimit(want) || (h.Resource.Lazy && !u.v.Provisioned) {
			// Known, or to be provisioned with the plan's limit by this
			// decision (see sight), which needs no read first.
			u.mu.Unlock()
			return nil
		}
		known := u.v.LimitKnown()
		u.withdraw() // the limit changes
		ch := make(chan struct{})
		u.rarely().planning = ch
		u.mu.Unlock()
		err := c.replan(ctx, u, h, known)
		u.lock()
		u.rare.planning = nil
		close(ch)
		u.mu.Unlock()
		return err
	}
}

// replan reads u's limit if it is not known, and sets the plan's if it
// differs.
func (c *Client) replan(ctx context.Context, u *user, h *Part, known bool) error {
	want := h.Request.Limit
	if !known {
		a, ok, err := c.lookupAccount(ctx, u.id)
		if err != nil || !ok {
			return err // missing: lazy provisioning gives it the plan
		}
		b, err := balanceOf(a)
		if err != nil {
			return err
		}
		u.lock()
		u.v.KnowLimit(b.Limit, 0) // what is in flight shows in the next read
		u.mu.Unlock()
		if b.Limit == want {
			return nil
		}
	}
	err := c.SetLimit(ctx, h.Resource, h.Request.User, want)
	if errors.Is(err, ErrUnknownUser) {
		return nil // provisioned lazily, with the plan
	}
	return err
}

// hasLimit says whether this Client knows u's limit to be limit. u.mu is
// held.
func (u *user) hasLimit(limit uint64) bool { return u.v.LimitKnown() && u.v.Limit() == limit }

// uncreditedAccount reports whether a user's account was never credited
// nor debited: created by a provisioning whose credit has not landed yet
// (or never will: one cut short), so its limit is not known to be 0.
func uncreditedAccount(a tb.Account) bool {
	return a.CreditsPosted == (tb.Uint128{}) && a.DebitsPosted == (tb.Uint128{})
}
