package ledger

import (
	"context"
	"iter"
	"slices"
	"time"

	"github.com/tblimit/tblimit/ledger/internal/status"
	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// An op is one call's work in the pipeline (see pipeline.go): what the
// call asked, its chain as sent and the answer it gets. Only this file,
// pipeline.go (the runner, which sends and completes batches of ops) and
// decide.go (the calls that make ops and wait for their answers) name an
// op; every other file of the package is called with users, transfers and
// their results.

// opSpec is what a call asks of the pipeline: the chain it sends and how
// its answer is read. newOp makes the call's op from it, and the call gets
// back an answer (see decide, send and sendChecks): nothing outside the
// pipeline touches an op.
//
// The chain's steps go beside the spec, not in it: newOp keeps some of a
// spec's pointers (checks, explain), so escape analysis sends everything a
// spec points to to the heap; passed apart, the one step of a common call
// stays on its caller's stack.
type opSpec struct {
	checks []check // a Check's parts: no chain, answered by reads (see answerChecks)
	key    ID      // the caller's ID for the request (see Request.ID), or zero
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

// step is a transfer of a call's chain: a hold the caller wants a
// Decision for (decide), or another transfer, which takes or ends a hold
// of u if u is not nil.
type step struct {
	t      tb.Transfer
	u      *user
	decide bool
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
	marked  bool // the last attempt went under the ID's marker (see op.newAttempt)
	// With opSpec.keep: the chain as last sent, and the index in it of
	// each deciding hold.
	chain []tb.Transfer
	holds []int
}

// op is one call's work in the pipeline: what it asked (made by newOp),
// its chain as sent, and the answer the runner gives it.
type op struct {
	// Room for the common case, one hold, without allocating.
	chain1  [1]tb.Transfer
	events1 [1]opEvent
	ds1     [1]Decision

	chain   []tb.Transfer
	events  []opEvent // the chain's holds and ends of holds, in chain order
	sights  []sight   // users its holds provision first (see sight), if any
	sights1 [1]sight
	seen    bool            // see opSpec
	checks  []check         // see opSpec
	key     ID              // see opSpec
	ctx     context.Context // the caller's, for a RequestObserver (see withCalls)
	marked  bool            // the chain starts with key's marker (a later attempt under key)
	payment bool            // see opSpec
	explain func(t *tb.Transfer, out status.Outcome) error
	merge   bool   // see opSpec; cleared when the op must go alone
	exact   bool   // see opSpec
	spare   uint64 // see opSpec

	// The answer.
	res     []tb.CreateTransferResult // one per transfer of chain
	ds      []Decision                // one per deciding hold, when every event was admitted, denied or linked
	shared  tb.Uint128                // the merged transfer that took an op's units (coalescing), if any
	retry   bool                      // a merged transfer was refused: send the op again alone
	earlier bool                      // admitted by an earlier attempt under key (TigerBeetle answered exists)
	local   bool                      // decided without being sent
	err     error                     // the batch's request failed

	// answered says that the pipeline is done with o: its last attempt
	// was answered and completed, so the runner no longer uses it (its
	// buffers may still point at o until their next turn, which only
	// overwrites them; see freeOp).
	answered bool
}

// newOp returns the op of the call that spec and steps (its chain, in
// order) describe: the one place an op is made. An op is large (room for a
// transfer, its event and its decision) and every decision that is sent
// needs one: a free one is reused (see freeOp), which spares an allocation
// per decision and the garbage collector's work on it.
func (c *Client) newOp(spec *opSpec, steps []step) *op {
	o, _ := c.pipe.ops.Get().(*op)
	if o == nil {
		o = new(op)
	}
	o.checks, o.key, o.seen, o.exact = spec.checks, spec.key, spec.seen, spec.exact
	o.payment, o.merge, o.spare, o.explain = spec.payment, spec.merge, spec.spare, spec.explain
	if len(steps) > 0 {
		o.chain, o.events = o.chain1[:0], o.events1[:0]
	}
	for i := range steps {
		st := &steps[i] // steps are large: not copied
		if st.u != nil {
			o.events = append(o.events, opEvent{i: len(o.chain), u: st.u, decide: st.decide})
		}
		o.chain = append(o.chain, st.t)
	}
	return o
}

// freeOp makes o free for reuse if the pipeline is done with it (an op
// whose caller stopped waiting may still be in a batch, and is left to the
// garbage collector). The caller must hold nothing that points into o: its
// chain, its results, its decisions. o may be nil.
func (c *Client) freeOp(o *op) {
	if o == nil || !o.answered {
		return
	}
	*o = op{}
	c.pipe.ops.Put(o)
}

// opEvent is a transfer of an op's chain that holds or ends units of a
// user: a pending transfer debiting the user's limit account, or the post
// or void of one.
type opEvent struct {
	i      int   // index in chain
	u      *user // the user whose limit account it debits
	decide bool  // the caller wants a Decision for this hold
}

// deciding yields the events of o's deciding holds, each with its index
// among them (that of its Part in the caller's parts).
func (o *op) deciding() iter.Seq2[int, opEvent] {
	return func(yield func(int, opEvent) bool) {
		k := 0
		for _, e := range o.events {
			if !e.decide {
				continue
			}
			if !yield(k, e) {
				return
			}
			k++
		}
	}
}

// submit sends o through the pipeline and waits for its answer, or for
// ctx (with the Client's default timeout if it has no deadline). An error
// wraps ErrUnavailable when the answer did not come: o may still be applied
// then, and the pipeline may still be using it, so the caller must not
// read its answer.
func (c *Client) submit(ctx context.Context, o *op) error {
	var wait time.Duration
	if !c.conn.InProcess() { // an in-process engine answers at once
		wait = c.conn.Wait(ctx)
	}
	o.ctx = ctx
	if _, err := c.pipe.batcher.Do(ctx, wait, o); err != nil {
		return c.conn.NoAnswer(err)
	}
	return o.err
}

// earlierTS is the timestamp of the transfer of o's chain that existed
// already (TigerBeetle echoes the original's).
func (o *op) earlierTS() uint64 {
	for _, s := range o.decidingResults() {
		if status.Classify(s.Status) == status.Admitted {
			return s.Timestamp
		}
	}
	return 0
}

// describe is the Decision for o's deciding hold e, from its user's view
// just after o's answer (failed: whether o's chain failed; o.earlier set).
// A request with a caller's ID is known by it, and an admission an earlier
// attempt made by that attempt's timestamp. e.u.mu is held.
func (o *op) describe(e opEvent, failed bool) Decision {
	t, s, v := &o.chain[e.i], o.res[e.i], &e.u.v
	amount, _ := u64(t.Amount)
	at := s.Timestamp
	id := fromTB(t.ID)
	if !o.key.IsZero() {
		id = o.key
	}
	switch {
	case failed && o.payment && o.paymentDenied():
		return decisionOf(v.Report(at), false, InsufficientFunds, id, at)
	case failed && (status.Classify(s.Status) == status.Denied || amount > v.Available(at)):
		return decisionOf(v.DenialReport(amount, at), false, LimitExceeded, id, at)
	case failed: // it would have fitted: another part of the chain failed
		return decisionOf(v.Report(at), false, Admitted, id, at)
	}
	r := v.SpareReport(at, o.spare)
	if o.earlier {
		r.Stamp = o.earlierTS()
	}
	return decisionOf(r, true, Admitted, id, at)
}

// paymentDenied reports whether o's payment itself failed for want of
// funds.
func (o *op) paymentDenied() bool {
	for i, t := range o.chain {
		if t.Code == codePayment {
			return status.Classify(o.res[i].Status) == status.Denied
		}
	}
	return false
}

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
		switch status.Classify(s.Status) {
		case status.Admitted:
			created = true
		case status.Denied, status.Linked:
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

// reset clears o's answer, to send it again.
func (o *op) reset() {
	o.res, o.ds, o.shared, o.retry, o.local, o.err = nil, nil, tb.Uint128{}, false, false, nil
}

// newAttempt makes o a new attempt after the cluster answered it: a transfer
// whose ID TigerBeetle spent (it failed on its own, and a failed ID answers
// id_already_failed for ever) gets a new one. A request with a caller's ID
// whose first transfer (the one that bears the ID) was spent goes from then
// on as the ID's marker followed by every transfer new, each carrying the
// ID in user_data_128. The marker is a transfer of nothing whose ID is
// derived from the request's, linked to the rest: created only with it.
// A later admission under the ID finds the marker first and fails whole
// (TigerBeetle answers exists), so that an ID is admitted at most once,
// while a denial leaves the marker unspent for the next attempt.
func (o *op) newAttempt() {
	res := o.res
	o.reset()
	kept := func(i int) bool {
		return res != nil && (status.Classify(res[i].Status) == status.Admitted || status.Classify(res[i].Status) == status.Linked)
	}
	if !o.key.IsZero() && !o.marked && !kept(0) {
		marker := keyMarker(o.key, o.chain)
		for i := range o.chain {
			if !kept(i) {
				o.chain[i].ID = NewID().tb()
			}
			o.chain[i].UserData128 = o.key.tb()
		}
		o.chain = slices.Insert(o.chain, 0, marker)
		for i := range o.events {
			o.events[i].i++
		}
		o.marked = true
		return
	}
	for i := range o.chain {
		if o.marked && i == 0 {
			continue // the marker is never spent: it only fails with the rest
		}
		if !kept(i) {
			o.chain[i].ID = NewID().tb()
		}
	}
	if first := o.firstHold(); o.key.IsZero() && first >= 0 {
		// An unnamed request is named by its first hold: the others carry
		// that name, new or not.
		for i := first + 1; i < len(o.chain); i++ {
			o.chain[i].UserData128 = o.chain[first].ID
		}
	}
}
