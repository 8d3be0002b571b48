package ledger

import (
	"context"
	"errors"
	"fmt"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// outcome is what a create result means for a decision: the one place
// where TigerBeetle's statuses become tblimit's outcomes.
type outcome uint8

const (
	outAdmitted   outcome = iota // created, or exists: a retry of an applied attempt
	outDenied                    // too few units (or funds); id_already_failed: a retry of a denied attempt
	outLinked                    // another event of the chain failed
	outNoUser                    // the debit account does not exist
	outNoResource                // the credit account does not exist
	outReusedID                  // the ID was used for a different transfer
	outUnexpected                // anything else: a bug, or a cluster we do not understand
)

func classify(s tb.CreateTransferStatus) outcome {
	switch s {
	case tb.TransferCreated, tb.TransferExists:
		return outAdmitted
	case tb.TransferExceedsCredits, tb.TransferIDAlreadyFailed:
		return outDenied
	case tb.TransferLinkedEventFailed:
		return outLinked
	case tb.TransferDebitAccountNotFound:
		return outNoUser
	case tb.TransferCreditAccountNotFound:
		return outNoResource
	case tb.TransferExistsWithDifferentFlags, tb.TransferExistsWithDifferentPendingID,
		tb.TransferExistsWithDifferentTimeout, tb.TransferExistsWithDifferentDebitAccountID,
		tb.TransferExistsWithDifferentCreditAccountID, tb.TransferExistsWithDifferentAmount,
		tb.TransferExistsWithDifferentUserData128, tb.TransferExistsWithDifferentUserData64,
		tb.TransferExistsWithDifferentUserData32, tb.TransferExistsWithDifferentLedger,
		tb.TransferExistsWithDifferentCode:
		return outReusedID
	}
	return outUnexpected
}

// chainOutcome reports whether a chain's results say it failed, and
// whether they decide it: every event admitted, denied, or failed with it.
func chainOutcome(res []tb.CreateTransferResult) (failed, decided bool) {
	decided = true
	for _, s := range res {
		switch classify(s.Status) {
		case outAdmitted:
		case outDenied, outLinked:
			failed = true
		default:
			failed, decided = true, false
		}
	}
	return failed, decided
}

// decide sends o, a chain of holds of holds' users, through the pipeline
// and returns one Decision per hold. It is the one step every decision
// path takes: a user of a lazy resource found missing is provisioned and
// the chain sent again (once, with new IDs: TigerBeetle spent the failed
// ones); a merged transfer the cluster refused is sent again alone; an
// unanswered call goes to the Client's Policy.
func (c *Client) decide(ctx context.Context, o *op, holds []Hold) ([]Decision, error) {
	if err := c.provisionFirst(ctx, o, holds); err != nil {
		return nil, err
	}
	for provisioned := false; ; {
		if err := c.submit(ctx, o); err != nil {
			return c.unavailableDecisions(o, err)
		}
		switch {
		case o.retry:
			o.reset()
			o.merge = false
			continue
		case o.ds != nil:
			return o.ds, c.exactRetryAfter(ctx, o)
		}
		lazy, err := c.failure(ctx, o, holds)
		if err != nil {
			return nil, err
		}
		if provisioned {
			return nil, c.missing(ctx, holds[lazy[0]].Resource, holds[lazy[0]].Request.User)
		}
		if err := c.provisionLazy(ctx, holds, lazy); err != nil {
			return nil, err
		}
		provisioned = true
		o.reset()
		for _, e := range o.events {
			if e.decide {
				o.chain[e.i].ID = NewID().tb() // a new attempt: TigerBeetle spent the failed IDs
			}
		}
	}
}

// reset clears o's answer, to send it again.
func (o *op) reset() {
	o.res, o.ds, o.shared, o.retry, o.local, o.err = nil, nil, tb.Uint128{}, false, false, nil
}

// failure explains why o's chain failed for a reason other than a limit.
// It returns the holds whose users are missing on a lazy resource (to be
// provisioned), or the error to return.
func (c *Client) failure(ctx context.Context, o *op, holds []Hold) (lazy []int, err error) {
	k := -1
	for _, e := range o.events {
		if !e.decide {
			continue
		}
		k++
		h := holds[k]
		switch s := o.res[e.i].Status; classify(s) {
		case outNoUser:
			if !h.Resource.Lazy {
				return nil, c.missing(ctx, h.Resource, h.Request.User)
			}
			lazy = append(lazy, k)
		case outLinked:
			// A later hold of the chain was not reached: its user may be
			// missing too. Provisioning it again is harmless.
			e.u.mu.Lock()
			known := e.u.v.limitKnown
			e.u.mu.Unlock()
			if h.Resource.Lazy && !known {
				lazy = append(lazy, k)
			}
		case outNoResource:
			return nil, fmt.Errorf("%w: no resource on ledger %d", ErrUnknownResource, h.Resource.Ledger)
		case outReusedID:
			return nil, fmt.Errorf("%w: %s was already used for a different request (%s)", ErrInvalidID, fromTB(o.chain[e.i].ID), s)
		case outUnexpected:
			return nil, transferStatusError(e.i, s)
		}
	}
	if len(lazy) == 0 || classify(o.res[o.events[lazy[0]].i].Status) != outNoUser && !anyNoUser(o) {
		return nil, fmt.Errorf("ledger: chain failed without a cause: %v", o.res)
	}
	return lazy, nil
}

func anyNoUser(o *op) bool {
	for _, s := range o.res {
		if classify(s.Status) == outNoUser {
			return true
		}
	}
	return false
}

// provisionFirst provisions, before the chain is sent, the users of lazy
// holds that carry a caller's ID and are not known to exist: a first
// attempt under the caller's ID must not be spent on a missing account.
func (c *Client) provisionFirst(ctx context.Context, o *op, holds []Hold) error {
	var idx []int
	k := -1
	for _, e := range o.events {
		if !e.decide {
			continue
		}
		k++
		if !holds[k].Resource.Lazy || holds[k].Request.ID.IsZero() {
			continue
		}
		e.u.mu.Lock()
		known := e.u.v.limitKnown
		e.u.mu.Unlock()
		if !known {
			idx = append(idx, k)
		}
	}
	return c.provisionLazy(ctx, holds, idx)
}

// provisionLazy provisions the users of the lazy holds listed in idx with
// their resource's default limit.
func (c *Client) provisionLazy(ctx context.Context, holds []Hold, idx []int) error {
	for _, i := range idx {
		h := holds[i]
		if err := c.provision(ctx, h.Resource, []UserLimit{{Key: h.Request.User, Limit: h.Resource.DefaultLimit}}, false); err != nil {
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
	return fmt.Errorf("%w: %q on %s", ErrUnknownUser, key, r.Name)
}

// unavailableDecisions applies the Client's Policy to o, whose answer did
// not come: one Decision per deciding hold, and the error to return.
func (c *Client) unavailableDecisions(o *op, err error) ([]Decision, error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	var ds []Decision
	for _, e := range o.events {
		if e.decide {
			ds = append(ds, Decision{Allowed: c.unavailable == FailOpen, Reason: Unavailable, ID: fromTB(o.chain[e.i].ID)})
		}
	}
	if c.unavailable == ReturnError {
		return ds, &attemptError{id: ds[0].ID, err: err}
	}
	return ds, nil
}

// denyLocally returns the decisions for holds (of users us) when one of
// them can be denied on its user's view, without sending anything: the
// denying hold says LimitExceeded, the others what their views say.
func (c *Client) denyLocally(holds []Hold, us []*user) ([]Decision, bool) {
	now := c.localNow()
	t := c.clusterNow()
	deny := -1
	for i, h := range holds {
		us[i].mu.Lock()
		ok := us[i].v.deny(h.Request.Amount, t, now)
		us[i].mu.Unlock()
		if ok {
			deny = i
			break
		}
	}
	if deny < 0 {
		return nil, false
	}
	ds := make([]Decision, len(holds))
	for i, h := range holds {
		us[i].mu.Lock()
		ds[i] = localDenial(&us[i].v, h.Request.Amount, t)
		us[i].mu.Unlock()
		if i != deny && ds[i].Remaining >= h.Request.Amount {
			ds[i].Reason, ds[i].RetryAfter = Admitted, 0
		}
	}
	c.localDenials.Add(1)
	return ds, true
}
