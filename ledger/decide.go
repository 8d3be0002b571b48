package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/internal/pipeline"
	"github.com/tblimit/tblimit/ledger/internal/status"
	"github.com/tblimit/tblimit/ledger/internal/view"
)

// A call's way through the pipeline (package internal/pipeline), on the
// call's side: the op is made, sent and sent again until its answer
// decides it. This is the one file of the package that names an op; the
// pipeline asks the rest of it through host (host.go).

// op is one call's work in the pipeline (see pipeline.Op).
type op = pipeline.Op[*user, Decision]

// step is a transfer of a call's chain (see pipeline.Step).
type step = pipeline.Step[*user]

// opSpec is what a call asks of the pipeline besides its chain (its
// steps): how its answer is read. decide and send make the call's op from
// it, and the call gets back an answer (decide) or its chain's results
// (send).
type opSpec struct {
	key ID // the caller's ID for the request (see Request.ID), or zero
	// seen: every user of its holds was seen provisioned before it was
	// sent: no sight.
	seen    bool
	exact   bool   // read the accounts of its holds before answering
	payment bool   // a payment: never allowed open; its second event pays
	merge   bool   // one hold without a caller's ID: coalescing may merge it
	spare   uint64 // units its hold takes beyond the call's: a lease's renewal, for the lease to hand out
	// explain, if set, says why transfer t of the deciding chain failed
	// with out (unknown user or resource), in the caller's terms.
	explain func(t *tb.Transfer, out status.Outcome) error
	// keep: the answer carries the chain as last sent, and where its
	// deciding holds are in it.
	keep bool
	// retrySpent: send makes a new attempt when an earlier one spent the
	// chain's IDs (a fund's; the IDs of ends of holds are derived from the
	// hold, and must stay so).
	retrySpent bool
}

// answer is what the pipeline hands back for a call that decides, made
// once when the call is done with the pipeline and shared with nothing:
// its op goes back for reuse.
type answer struct {
	ds []Decision // one per deciding hold
	// hold is the ID of the first deciding hold as last sent (zero if
	// the call had none).
	hold tb.Uint128
	// Read only when the cluster answered (ds is not Unavailable's):
	earlier bool // admitted by an earlier attempt under the request's ID (TigerBeetle answered exists)
	marked  bool // the last attempt went under the ID's marker (see pipeline.NewAttempt)
	// With opSpec.keep: the chain as last sent, and the index in it of
	// each deciding hold.
	chain []tb.Transfer
	holds []int
}

// pipelineSpec is what the pipeline keeps of s.
func (s *opSpec) pipelineSpec() pipeline.Spec {
	ps := pipeline.Spec{Key: s.key.tb(), Exact: s.exact, Merge: s.merge, Spare: s.spare}
	if s.payment {
		ps.Pays = codePayment
	}
	return ps
}

// decide makes the op of spec and steps, a chain of holds of parts'
// users, sends it through the pipeline and returns its answer: one
// Decision per hold, appended to dst (whose room the caller may provide).
// Every call that takes units and asks the cluster takes this step
// (Acquire, AcquireAll, Reserve, Pay, Authorize, Charge and a lease's
// renewal); calls answered without the cluster (local and published
// denials, a lease's admissions, a Check a view answers) do not; those
// that only end holds or fund (Commit, Cancel, Reset, a lease's give-back,
// Fund) go through send, and a Check that reads through sendChecks.
func (c *Client) decide(ctx context.Context, spec *opSpec, steps []step, parts []Part, dst []Decision) (answer, error) {
	o := c.pipe.New(spec.pipelineSpec(), steps)
	ds, err := c.attempts(ctx, o, spec, parts)
	a := answer{ds: ds}
	if len(ds) == 1 || dst != nil {
		a.ds = append(dst, ds...) // ds may be o's own room, which o's next call reuses
	}
	if first := o.FirstHold(); first >= 0 {
		a.hold = o.Chain[first].ID
	}
	if o.Answered {
		a.earlier, a.marked = o.Earlier, o.Marked
	}
	if spec.keep {
		a.chain = slices.Clone(o.Chain)
		for _, e := range o.Deciding() {
			a.holds = append(a.holds, e.I)
		}
	}
	c.pipe.Free(o)
	return a, err
}

// send makes the op of spec and steps, a chain that ends holds or funds
// and decides nothing, sends it through the pipeline and returns the
// chain's results.
// With spec.retrySpent, a chain whose IDs an earlier attempt spent is sent
// again as a new attempt (see reattempt).
func (c *Client) send(ctx context.Context, spec *opSpec, steps []step) ([]tb.CreateTransferResult, error) {
	o := c.pipe.New(spec.pipelineSpec(), steps)
	for attempt := 0; ; attempt++ {
		if err := c.pipe.Submit(ctx, o); err != nil {
			return nil, err
		}
		if spec.retrySpent && pipeline.Spent(o.Res) && attempt < maxAttempts {
			if err := c.reattempt(ctx, o); err != nil {
				return nil, err
			}
			continue
		}
		return o.Res, nil // a slice of the batch's results: o is left to the collector
	}
}

// sendChecks sends checks through the pipeline, which reads their users'
// accounts once every earlier batch has completed (see answerCheck), and
// returns one Decision per check.
func (c *Client) sendChecks(ctx context.Context, checks []check) ([]Decision, error) {
	ds, err := c.pipe.Checks(ctx, checks)
	if err != nil {
		return c.unansweredChecks(len(checks), err)
	}
	return ds, nil
}

// attempts sends o until its answer decides it: a user of a lazy resource
// not seen provisioned is provisioned in the same batch (see sight); a
// merged transfer the cluster refused is sent again alone; a request whose
// ID was spent by an earlier attempt is sent again as a new attempt under
// that ID (see reattempt); a lazy user found missing all the same is
// provisioned and the chain sent again (once); an unanswered call goes to
// the Client's OnUnavailable.
func (c *Client) attempts(ctx context.Context, o *op, spec *opSpec, parts []Part) ([]Decision, error) {
	for provisioned, n := false, 0; ; n++ {
		if err := c.sight(ctx, o, spec, parts); err != nil {
			return c.unavailableDecisions(o, spec, err) // its resource's check went unanswered, or failed
		}
		if err := c.pipe.Submit(ctx, o); err != nil {
			return c.unavailableDecisions(o, spec, err)
		}
		switch {
		case o.Retry:
			o.Reset()
			o.Merge = false
			continue
		case o.Ds != nil:
			o.Answered = true
			if o.Local || len(o.Ds) == 0 || o.Ds[0].Allowed {
				return o.Ds, nil // nothing to read again: see limitsOfDenied and exactRetryAfter
			}
			if err := c.limitsOfDenied(ctx, o); err != nil {
				return o.Ds, err
			}
			return o.Ds, c.exactRetryAfter(ctx, o, spec)
		case pipeline.Spent(o.DecidingResults()) && n < maxAttempts:
			if err := c.reattempt(ctx, o); err != nil {
				return nil, err
			}
			continue
		}
		lazy, err := c.failure(ctx, o, spec, parts)
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

// reattempt makes o a new attempt (see pipeline.NewAttempt), with the
// marker accounts of its ledger in place if it now carries a marker.
func (c *Client) reattempt(ctx context.Context, o *op) error {
	c.pipe.NewAttempt(o)
	if o.Marked {
		return c.ensureMarkers(ctx, o.Chain[0].Ledger)
	}
	return nil
}

// maxAttempts bounds the attempts of one call. An attempt is made again
// when its ID was spent: by an earlier call under the request's ID (once),
// or by its own earlier delivery (a request the network delivered twice);
// every attempt is safe, since the ID's marker admits at most one.
const maxAttempts = 8

// unavailableDecisions applies the Client's OnUnavailable to o, whose answer did
// not come: one Decision per deciding hold, and the error to return.
func (c *Client) unavailableDecisions(o *op, spec *opSpec, err error) ([]Decision, error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	// A call that coalescing may have merged into a transfer shared with
	// others has no name of its own to be retried by.
	var name ID
	if !(o.Merge && c.coalesce) {
		name = fromTB(o.Name())
	}
	var ds []Decision
	for range o.Deciding() {
		ds = append(ds, c.unanswered(name, spec.payment))
	}
	if c.unavailable == ReturnError || spec.payment {
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
func (c *Client) sight(ctx context.Context, o *op, spec *opSpec, parts []Part) error {
	o.Unsighted()
	if spec.seen {
		return nil // and they stay so
	}
	for k, e := range o.Deciding() {
		h := &parts[k]
		if !h.Resource.Lazy {
			continue
		}
		if e.User.seenProvisioned() {
			continue
		}
		if err := c.checkResource(ctx, h.Resource); err != nil {
			return err
		}
		o.Provision(e.User, h.provisionLimit())
	}
	return nil
}

// failure explains why o's deciding chain failed for a reason other than
// a limit. It returns the holds whose users are missing on a lazy resource
// (to be provisioned), or the error to return.
func (c *Client) failure(ctx context.Context, o *op, spec *opSpec, parts []Part) (lazy []int, err error) {
	res, start := o.DecidingResults(), o.DecidingStart()
	for i, s := range res {
		out := status.Classify(s.Status)
		if spec.explain != nil {
			if err := spec.explain(&o.Chain[start+i], out); err != nil {
				return nil, err
			}
		}
		switch out {
		case status.ReusedID:
			return nil, fmt.Errorf("%w: %s named a request with %s", ErrIDReused, fromTB(o.Name()), status.Differs(s.Status))
		case status.Unexpected:
			return nil, transferStatusError(i, s.Status)
		}
	}
	for k, e := range o.Deciding() {
		h := parts[k]
		switch status.Classify(o.Res[e.I].Status) {
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
			if h.Resource.Lazy && !e.User.seenProvisioned() {
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
	if o.Local || len(o.Ds) == 0 || o.Ds[0].Allowed {
		return nil
	}
	read := false
	for _, e := range o.Deciding() {
		u := e.User
		u.lock()
		known := u.v.LimitKnown()
		u.mu.Unlock()
		if known {
			continue
		}
		a, ok, err := c.lookupAccount(ctx, u.id)
		if err != nil {
			return err
		}
		b, berr := balanceOf(a)
		if !ok || berr != nil {
			continue
		}
		u.lock()
		// Holds returning within a second of the denial may or may not be
		// among the account's pending debits.
		u.v.Read(b.Limit, b.InFlight, o.Res[e.I].Timestamp, uint64(time.Second))
		u.mu.Unlock()
		read = true
	}
	if read {
		c.pipe.Redescribe(o)
	}
	return nil
}

// exactRetryAfter, for an exact op whose holds were denied, reads the
// transfers in flight of every user whose view does not know when its
// units return, and describes the decisions again: RetryAfter and
// ResetAfter are then exact too.
func (c *Client) exactRetryAfter(ctx context.Context, o *op, spec *opSpec) error {
	if !spec.exact || o.Local || len(o.Ds) == 0 || o.Ds[0].Allowed {
		return nil
	}
	scanned := false
	for _, e := range o.Deciding() {
		u := e.User
		u.lock()
		known := u.v.Complete()
		window := u.res.Window
		u.mu.Unlock()
		if known {
			continue
		}
		t := o.Res[e.I].Timestamp
		flights, err := c.readFlights(ctx, u.id, maxTimeout(window), t, 0, true)
		if err != nil {
			return err
		}
		u.lock()
		u.v.Scanned(holdsOf(flights), t)
		u.mu.Unlock()
		scanned = true
	}
	if scanned {
		c.pipe.Redescribe(o)
	}
	return nil
}
