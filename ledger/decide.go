package ledger

import (
	"context"
	"errors"
	"slices"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/internal/view"
)

// decidingResults returns the results of o's deciding chain: the linked chain
// that holds the units the caller asked for (an op may also carry a chain
// that ends an earlier hold, a lease's).
func (o *op) decidingResults() []tb.CreateTransferResult {
	start := o.decidingStart()
	if start < 0 || o.res == nil {
		return nil
	}
	end := start
	for end < len(o.chain)-1 && o.chain[end].TransferFlags().Linked {
		end++
	}
	return o.res[start : end+1]
}

// decidingStart is the index in o's chain where its deciding chain starts,
// or -1 if it has none.
func (o *op) decidingStart() int {
	start := o.firstHold()
	for start > 0 && o.chain[start-1].TransferFlags().Linked {
		start--
	}
	return start
}

// firstHold is the index in o's chain of its first deciding hold, or -1.
func (o *op) firstHold() int {
	for _, e := range o.events {
		if e.decide {
			return e.i
		}
	}
	return -1
}

// name is what names o's request: its caller's ID, else the ID of its
// first hold.
func (o *op) name() ID {
	if !o.key.IsZero() {
		return o.key
	}
	return fromTB(o.chain[o.firstHold()].ID)
}

// chainOutcome reports whether a chain's results say it failed, and
// whether they decide it: every event admitted, denied, or failed with it.
// A chain that failed although one of its events was created existed
// already (TigerBeetle answers exists, which fails the rest of the chain):
// earlier says so, and it counts as admitted.
func chainOutcome(res []tb.CreateTransferResult) (failed, decided, earlier bool) {
	decided = true
	created := false
	for _, s := range res {
		switch classify(s.Status) {
		case outAdmitted:
			created = true
		case outDenied, outLinked:
			failed = true
		default:
			failed, decided = true, false
		}
	}
	if failed && decided && created {
		return false, true, true
	}
	return failed, decided, false
}

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
		if classify(s.Status) == outSpent {
			return true
		}
	}
	return false
}

// reset clears o's answer, to send it again.
func (o *op) reset() {
	o.res, o.ds, o.shared, o.retry, o.local, o.err = nil, nil, tb.Uint128{}, false, false, nil
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
