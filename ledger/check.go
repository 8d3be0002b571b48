package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/tblimit/tblimit/ledger/internal/pipeline"
	"github.com/tblimit/tblimit/ledger/internal/view"
)

// Checks: whether units are available, taking nothing (Envoy's hits_addend
// of 0, which a gateway sends at a request's start when it charges at its
// end). A check is answered from the user's view when the view knows every
// unit in flight and the limit; otherwise it is an op of the pipeline that
// reads the user's account: the runner reads the accounts of every check of
// a batch in one lookup_accounts, between two batches, as it reads the
// accounts of views due a read, and answers each check from the view the
// read taught. A check writes nothing: a key never seen is not provisioned,
// and shows its plan's limit (or the default), all available.
//
// We considered a hold voided in the same chain (a pending transfer and its
// void, linked): exact at the instant and in the same request as the holds
// of the other parts, but two transfers stored for ever per check, and a
// gateway checks every request. A read stores nothing, and a view that
// knows the user answers without any I/O.

// check is a part of a Check: Amount units of User, under its plan
// (Request.Limit; 0: none).
type check = pipeline.Check[*user]

// Check reports whether req.Amount units of r are available to req.User
// now, and takes nothing: the Decision is Allowed when they are, and says
// what Acquire's would (Limit, Remaining, RetryAfter, ResetAfter) with
// nothing taken. A user that has no account yet on a Lazy resource has all
// of its limit (req.Limit if set, else r.DefaultLimit); it is not
// provisioned, since a check writes nothing. Check is shorthand for
// CheckAll with one part.
//
// A check is answered without I/O when this Client knows every unit in
// flight of the user; else it reads the user's account, in one request
// with the other checks in flight. Other processes may take units between
// a check and the decision that follows it: only Acquire's Allowed is
// exact.
func (c *Client) Check(ctx context.Context, r Resource, req Request) (Decision, error) {
	ds, err := c.CheckAll(ctx, []Part{{Resource: r, Request: req}})
	return soleDecision(ds), err
}

// CheckAll checks every part (see Check) and returns one Decision per part,
// in order. Nothing is taken, whatever they say.
func (c *Client) CheckAll(ctx context.Context, parts []Part) ([]Decision, error) {
	if len(parts) == 0 || len(parts) > BatchMax {
		return nil, fmt.Errorf("%w: %d parts in one check", ErrTooMany, len(parts))
	}
	checks := make([]check, len(parts))
	for i := range parts {
		h := parts[i]
		if err := validPart(h.Resource, &h.Request); err != nil {
			return nil, err
		}
		if !h.Request.ID.IsZero() {
			return nil, fmt.Errorf("%w: a check takes nothing, and takes no ID", ErrInvalidID)
		}
		if err := c.checkResource(ctx, h.Resource); err != nil {
			return nil, err
		}
		checks[i] = check{User: c.users.get(h.Resource, h.Request.User), Amount: h.Request.Amount, Plan: h.Request.Limit}
	}
	if ds, ok := c.checkLocally(checks); ok {
		return ds, nil
	}
	return c.sendChecks(ctx, checks)
}

// checkLocally answers checks from their users' views, if every view knows
// every unit in flight and the limit (a plan's included).
func (c *Client) checkLocally(checks []check) ([]Decision, bool) {
	_, t := c.nows()
	var ds []Decision
	for _, ch := range checks {
		ch.User.mu.Lock() // not lock: a check changes nothing
		ok := ch.User.v.Complete() && (ch.Plan == 0 || ch.User.v.Limit() == ch.Plan)
		if ok {
			ds = append(ds, verdict(&ch.User.v, ch.Amount, t, true))
		}
		ch.User.mu.Unlock()
		if !ok {
			return nil, false
		}
	}
	return ds, true
}

// unansweredChecks applies the Client's OnUnavailable to checks the cluster
// did not answer.
func (c *Client) unansweredChecks(n int, err error) ([]Decision, error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	ds := make([]Decision, n)
	for i := range ds {
		ds[i] = c.unanswered(ID{}, false)
	}
	if c.unavailable == ReturnError {
		return ds, err
	}
	return ds, nil
}

// answerCheck answers ch at t from its user's view, just read: a user
// without an account (or whose provisioning has not credited it yet) has
// all of its plan's limit, or the default, on a lazy resource, and is
// unknown on another.
func (c *Client) answerCheck(ch check, t uint64) (Decision, error) {
	ch.User.mu.Lock()
	defer ch.User.mu.Unlock()
	if ch.User.v.LimitKnown() {
		return verdict(&ch.User.v, ch.Amount, t, true), nil
	}
	if !ch.User.res.Lazy {
		return Decision{}, &UnknownUserError{Resource: ch.User.res, User: ch.User.key}
	}
	fresh := view.New(cmp.Or(ch.Plan, ch.User.res.DefaultLimit), uint64(ch.User.res.Window), 0, true)
	return verdict(&fresh, ch.Amount, t, true), nil
}
