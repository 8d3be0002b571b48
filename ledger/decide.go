package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/internal/status"
	"github.com/tblimit/tblimit/ledger/internal/view"
)

// decide makes the op of spec and steps, a chain of holds of parts'
// users, sends it through the pipeline and returns its answer: one
// Decision per hold, appended to dst (whose room the caller may provide). Every call that
// takes units and asks the cluster takes this step (Acquire, AcquireAll,
// Reserve, Pay, Authorize, Charge and a lease's renewal); calls answered
// without the cluster (local and published denials, a lease's admissions,
// a Check a view answers) do not; those that only end holds or fund
// (Commit, Cancel, Reset, a lease's give-back, Fund) go through send, and
// a Check that reads through sendChecks.
func (c *Client) decide(ctx context.Context, spec *opSpec, steps []step, parts []Part, dst []Decision) (answer, error) {
	o := c.newOp(spec, steps)
	ds, err := c.attempts(ctx, o, parts)
	a := answer{ds: ds}
	if len(ds) == 1 || dst != nil {
		a.ds = append(dst, ds...) // ds may be o's own room, which o's next call reuses
	}
	if first := o.firstHold(); first >= 0 {
		a.hold = o.chain[first].ID
	}
	if o.answered {
		a.earlier, a.marked = o.earlier, o.marked
	}
	if spec.keep {
		a.chain = slices.Clone(o.chain)
		for _, e := range o.events {
			if e.decide {
				a.holds = append(a.holds, e.i)
			}
		}
	}
	c.freeOp(o)
	return a, err
}

// send makes the op of spec and steps, a chain that ends holds or funds
// and decides nothing, sends it through the pipeline and returns the
// chain's results.
// With spec.retrySpent, a chain whose IDs an earlier attempt spent is sent
// again as a new attempt (see reattempt).
func (c *Client) send(ctx context.Context, spec *opSpec, steps []step) ([]tb.CreateTransferResult, error) {
	o := c.newOp(spec, steps)
	for attempt := 0; ; attempt++ {
		if err := c.submit(ctx, o); err != nil {
			return nil, err
		}
		if spec.retrySpent && spent(o.res) && attempt < maxAttempts {
			if err := c.reattempt(ctx, o); err != nil {
				return nil, err
			}
			continue
		}
		return o.res, nil // a slice of the batch's results: o is left to the collector
	}
}

// sendChecks sends checks through the pipeline, which reads their users'
// accounts once every earlier batch has completed (see answerChecks), and
// returns one Decision per check.
func (c *Client) sendChecks(ctx context.Context, checks []check) ([]Decision, error) {
	o := c.newOp(&opSpec{checks: checks}, nil)
	c.checking.Add(1)
	defer c.checking.Add(-1)
	for {
		if err := c.submit(ctx, o); err != nil {
			return c.unansweredChecks(len(checks), err)
		}
		if !o.retry {
			o.answered = true
			ds := o.ds
			c.freeOp(o)
			return ds, nil
		}
		o.reset() // sent while a batch was completing: again, once quiet
	}
}

// attempts sends o until its answer decides it: a user of a lazy resource
// not seen provisioned is provisioned in the same batch (see sight); a
// merged transfer the cluster refused is sent again alone; a request whose
// ID was spent by an earlier attempt is sent again as a new attempt under
// that ID (see reattempt); a lazy user found missing all the same is
// provisioned and the chain sent again (once); an unanswered call goes to
// the Client's OnUnavailable.
func (c *Client) attempts(ctx context.Context, o *op, parts []Part) ([]Decision, error) {
	for provisioned, n := false, 0; ; n++ {
		if err := c.sight(ctx, o, parts); err != nil {
			return c.unavailableDecisions(o, err) // its resource's check went unanswered, or failed
		}
		if err := c.submit(ctx, o); err != nil {
			return c.unavailableDecisions(o, err)
		}
		switch {
		case o.retry:
			o.reset()
			o.merge = false
			continue
		case o.ds != nil:
			o.answered = true
			if o.local || len(o.ds) == 0 || o.ds[0].Allowed {
				return o.ds, nil // nothing to read again: see limitsOfDenied and exactRetryAfter
			}
			if err := c.limitsOfDenied(ctx, o); err != nil {
				return o.ds, err
			}
			return o.ds, c.exactRetryAfter(ctx, o)
		case spent(o.decidingResults()) && n < maxAttempts:
			if err := c.reattempt(ctx, o); err != nil {
				return nil, err
			}
			continue
		}
		lazy, err := c.failure(ctx, o, parts)
		if err != nil {
			return nil, err
		}
		if provisioned {
			return nil, c.missing(ctx, parts[lazy[0]].Resource, parts[lazy[0]].Request.User)
		}
		if err := c.provisionLazy(ctx, parts, lazy); err != nil {
			return nil, err
		}
		provisioned = true
		if err := c.reattempt(ctx, o); err != nil {
			return nil, err
		}
	}
}

// reattempt makes o a new attempt (see op.newAttempt), with the marker accounts of
// its ledger in place if it now carries a marker.
func (c *Client) reattempt(ctx context.Context, o *op) error {
	o.newAttempt()
	if o.marked {
		return c.ensureMarkers(ctx, o.chain[0].Ledger)
	}
	return nil
}

// maxAttempts bounds the attempts of one call. An attempt is made again
// when its ID was spent: by an earlier call under the request's ID (once),
// or by its own earlier delivery (a request the network delivered twice);
// every attempt is safe, since the ID's marker admits at most one.
const maxAttempts = 8

// spent reports whether a result says that an earlier attempt under the
// same ID failed (TigerBeetle keeps failed IDs for ever).
func spent(res []tb.CreateTransferResult) bool {
	for _, s := range res {
		if status.Classify(s.Status) == status.Spent {
			return true
		}
	}
	return false
}

// unavailableDecisions applies the Client's OnUnavailable to o, whose answer did
// not come: one Decision per deciding hold, and the error to return.
func (c *Client) unavailableDecisions(o *op, err error) ([]Decision, error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	// A call that coalescing may have merged into a transfer shared with
	// others has no name of its own to be retried by.
	var name ID
	if !(o.merge && c.coalesce) {
		name = o.name()
	}
	var ds []Decision
	for _, e := range o.events {
		if e.decide {
			ds = append(ds, c.unanswered(name, o.payment))
		}
	}
	if c.unavailable == ReturnError || o.payment {
		if name.IsZero() {
			return ds, err
		}
		return ds, &attemptError{id: name, err: err}
	}
	return ds, nil
}

// unanswered is the Decision for a call the cluster did not answer (id:
// the attempt's name, zero if it has none): what the Client's OnUnavailable
// makes of it, but a payment is never made open. Nothing was learnt of the
// user: it reports no numbers, and no Timestamp.
func (c *Client) unanswered(id ID, payment bool) Decision {
	return decisionOf(view.Report{}, c.unavailable == FailOpen && !payment, Unavailable, id, 0)
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

// failure explains why o's deciding chain failed for a reason other than
// a limit. It returns the holds whose users are missing on a lazy resource
// (to be provisioned), or the error to return.
func (c *Client) failure(ctx context.Context, o *op, parts []Part) (lazy []int, err error) {
	res, start := o.decidingResults(), o.decidingStart()
	for i, s := range res {
		out := status.Classify(s.Status)
		if o.explain != nil {
			if err := o.explain(&o.chain[start+i], out); err != nil {
				return nil, err
			}
		}
		switch out {
		case status.ReusedID:
			return nil, fmt.Errorf("%w: %s named a request with %s", ErrIDReused, o.name(), status.Differs(s.Status))
		case status.Unexpected:
			return nil, transferStatusError(i, s.Status)
		}
	}
	for k, e := range o.deciding() {
		h := parts[k]
		switch status.Classify(o.res[e.i].Status) {
		case status.NoUser:
			if !h.Resource.Lazy {
				return nil, c.missing(ctx, h.Resource, h.Request.User)
			}
			lazy = append(lazy, k)
		case status.NoResource:
			return nil, fmt.Errorf("%w: no resource on ledger %d", ErrUnknownResource, h.Resource.Ledger)
		case status.Linked:
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

// limitsOfDenied, for an op whose holds were denied, reads the accounts of
// the users whose limit this Client has not learnt yet (a process just
// started, a user it never read) and describes the decisions again, so that
// a denial says the user's own limit, and whether the amount can ever fit,
// rather than the resource's default: one request more, for those denials
// only.
func (c *Client) limitsOfDenied(ctx context.Context, o *op) error {
	if o.local || len(o.ds) == 0 || o.ds[0].Allowed {
		return nil
	}
	read := false
	for _, e := range o.events {
		if !e.decide {
			continue
		}
		e.u.lock()
		known := e.u.v.LimitKnown()
		e.u.mu.Unlock()
		if known {
			continue
		}
		a, ok, err := c.lookupAccount(ctx, e.u.id)
		if err != nil {
			return err
		}
		b, berr := balanceOf(a)
		if !ok || berr != nil {
			continue
		}
		e.u.lock()
		// Holds returning within a second of the denial may or may not be
		// among the account's pending debits.
		e.u.v.Read(b.Limit, b.InFlight, o.res[e.i].Timestamp, uint64(time.Second))
		e.u.mu.Unlock()
		read = true
	}
	if read {
		c.redescribe(o)
	}
	return nil
}

// exactRetryAfter, for an exact op whose holds were denied, reads the
// transfers in flight of every user whose view does not know when its
// units return, and describes the decisions again: RetryAfter and
// ResetAfter are then exact too.
func (c *Client) exactRetryAfter(ctx context.Context, o *op) error {
	if !o.exact || o.local || len(o.ds) == 0 || o.ds[0].Allowed {
		return nil
	}
	scanned := false
	for _, e := range o.events {
		if !e.decide {
			continue
		}
		e.u.lock()
		known := e.u.v.Complete()
		window := e.u.res.Window
		e.u.mu.Unlock()
		if known {
			continue
		}
		t := o.res[e.i].Timestamp
		flights, err := c.readFlights(ctx, e.u.id, maxTimeout(window), t, 0, true)
		if err != nil {
			return err
		}
		e.u.lock()
		e.u.v.Scanned(holdsOf(flights), t)
		e.u.mu.Unlock()
		scanned = true
	}
	if scanned {
		c.redescribe(o)
	}
	return nil
}
