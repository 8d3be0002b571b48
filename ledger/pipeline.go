package ledger

import (
	"context"
	"iter"
	"math"
	"sync"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/internal/conn"
	"github.com/tblimit/tblimit/ledger/internal/view"
)

// The decision pipeline. Every call that takes, ends or pays (Acquire,
// AcquireAll, Pay, Reserve and its Commit and Cancel, a lease's renewal and
// give-back) is an op: a chain of transfers to create and the users whose
// holds it takes or ends. Ops wait in a conn.Batcher and go to the cluster
// in batches, one request in flight at a time, as one create request: one
// round trip for every op of the batch, as a TigerBeetle client would send
// them. The batch's runner (runner) then completes it while the next batch
// is in flight: it classifies each answer, teaches the users' views what
// happened, and describes every decision from them, so that no decision
// needs a read of its own. Reads wait for quiet: no batch in flight and
// every earlier one completed.
//
// Strategies differ only in how a batch is built: plainly (each op's chain
// as it is) or, with WithCoalescing, merging the single holds of one user
// into one transfer. Leases (WithLeases) admit calls before they reach the
// pipeline and send their renewals through it.

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
	explain func(t *tb.Transfer, out outcome) error
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
	explain func(t *tb.Transfer, out outcome) error
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

// pipeline is a Client's pipeline: its Batcher, the ops free for reuse,
// and the state of its batches, which the Batcher's runner and the
// completion of a batch (which may overlap the next Send) each use their
// own part of, and never the same field at once (see runner).
type pipeline struct {
	batcher   *conn.Batcher[*op]
	ops       sync.Pool    // ops free for reuse (see newOp)
	batches   [2]sentBatch // one in flight, one completing (see Send)
	turn      int          // the next batch's, in batches
	lastExact bool         // the last batch answered reads its accounts (see Quiet)
	lastTS    uint64       // the latest timestamp of the last batch
	lastLocal int64        // this Client's clock when its answer came
}

// start makes c's pipeline's Batcher, once c's options are set.
func (p *pipeline) start(c *Client) {
	p.batcher = conn.NewBatcher[*op](&runner{c}, c.conn.InProcess(), c.gather, c.maxWaiting)
}

// patient is the context of the runner's requests (see Send).
var patient = conn.Patient(context.Background())

// runner runs the pipeline's batches for the Batcher (see conn.Runner): a
// batch's transfers are built (plain or coalesced) and sent as one create,
// and, while the next batch is in flight, the batch is completed from the
// answer, every op settled. The Batcher calls Send and Quiet from one
// goroutine at a time, and a batch's Complete either from that goroutine
// or from one of its own while the next batch's Send waits for its answer:
// Send touches nothing Complete does (the views, the read queues, the last
// timestamp) unless every earlier batch has completed. It is its Client
// seen as the Batcher's Runner: a Client has one, made with it.
type runner struct{ c *Client }

// sentBatch is a batch of ops whose answer came.
type sentBatch struct {
	c     *Client
	ops   []*op
	b     batch // its transfers, in buffers reused from batch to batch
	exact bool  // some op reads its accounts before answering
	res   []tb.CreateTransferResult
	err   error
	now   int64 // this Client's clock when the answer came
}

// Send builds the batch's transfers, sends them and waits for the answer.
// Reads that keep views true go first when every earlier batch has
// completed (settled; see Quiet).
//
// The request waits for the answer however long it takes (callers do not:
// each waits until its own deadline). Giving up would not make the cluster
// answer sooner, since the client keeps one request in flight, but would
// queue the next batch behind the lost one, out of its callers' reach;
// waiting keeps the next calls in the Batcher, where a caller whose
// deadline passes takes its call back unsent.
func (r *runner) Send(ops []*op, settled bool, more func(keep func(*op) bool) []*op) conn.Flight {
	c := r.c
	if settled {
		c.readBack()
		c.scanBack()
		if c.checking.Load() > 0 { // every op with checks is counted there
			c.answerChecks(ops)
		}
	} else {
		for _, o := range ops {
			o.retry = o.retry || o.checks != nil // read once quiet (see Quiet)
		}
	}
	f := &c.pipe.batches[c.pipe.turn] // reused: one in flight, one completing
	c.pipe.turn ^= 1
	*f = sentBatch{c: c, ops: ops, b: f.b}
	if f.b.sightings(ops); len(f.b.accounts) > 0 {
		provisions := func(o *op) bool { return len(o.sights) > 0 }
		ares, err := c.conn.CreateAccountsAhead(c.withCalls(patient, ops, provisions), f.b.accounts)
		if err != nil {
			f.err = err
			return f
		}
		f.b.provisioned(ops, ares)
		// The calls that came while the accounts were made ride on this
		// batch's create, as they would on a TigerBeetle client's next
		// request, rather than wait for the next batch's: those that need
		// nothing before their holds.
		if extra := more(rides); len(extra) > 0 {
			ops = append(ops[:len(ops):len(ops)], extra...)
			f.ops = ops
		}
	}
	c.build(ops, &f.b)
	for _, o := range ops {
		f.exact = f.exact || o.exact
	}
	c.pipe.lastExact = f.exact
	if len(f.b.send) > 0 {
		f.res, f.err = c.conn.CreateTransfers(c.withCalls(patient, ops, inCreate), f.b.send)
	}
	f.now = c.localNow()
	return f
}

// inCreate reports whether build put op o's transfers in its batch's create
// (alone or merged).
func inCreate(o *op) bool { return !o.local && o.err == nil && o.checks == nil }

// rides reports whether op o, come while a batch's accounts were made, may
// join its create: it provisions no user, checks nothing, and reads
// nothing after its create.
func rides(o *op) bool { return len(o.sights) == 0 && o.checks == nil && !o.exact }

// Quiet asks the Batcher to complete a batch before sending the next when
// the next must see its effects: a read is due or a check waits (a read
// must follow the writes of every batch before it, and find their holds in
// the views), the last batch reads its accounts before answering, or
// coalescing merges the next batch's holds by what the views know.
func (r *runner) Quiet() bool {
	c := r.c
	return c.coalesce || c.pipe.lastExact || c.readsDue() || c.checking.Load() > 0
}

// Complete settles every op of f from the answer.
func (f *sentBatch) Complete() {
	c, b := f.c, &f.b
	if f.err != nil {
		for _, o := range f.ops {
			if !o.local {
				o.err = f.err
			}
		}
		return
	}
	if len(b.send) > 0 {
		c.clock(f.res, f.now)
		b.spread(f.res)
	}
	for _, s := range b.slots {
		if s.g != nil {
			c.settleMerged(s.g, f.now)
		} else {
			c.settle(s.o, f.now)
		}
	}
	if f.exact {
		c.readExact(f.ops)
	}
}

// clock learns the cluster's time from a batch's answer: its latest
// timestamp against this Client's clock when the answer came (an
// underestimate of the cluster's clock by up to a round trip, so that what
// is computed from it returns late rather than early).
func (c *Client) clock(res []tb.CreateTransferResult, now int64) {
	var last uint64
	for _, r := range res {
		last = max(last, r.Timestamp)
	}
	c.skew.Store(int64(last) - now)
	c.pipe.lastTS, c.pipe.lastLocal = last, now
}

// localNow is this Client's clock in nanoseconds.
func (c *Client) localNow() int64 { return c.now().UnixNano() }

// clusterNow estimates the cluster's clock (from below, on a cluster).
func (c *Client) clusterNow() uint64 {
	_, t := c.nows()
	return t
}

// nows reads this Client's clock once and returns it with the cluster's
// clock estimated from it (see clusterNow).
func (c *Client) nows() (int64, uint64) {
	now := c.localNow()
	if c.conn.InProcess() {
		return now, uint64(now) // the engine's own clock
	}
	return now, uint64(now + c.skew.Load())
}

// settle reads the answer to o's chain: every hold and end of a hold
// teaches its user's view, and each deciding hold is described.
func (c *Client) settle(o *op, now int64) {
	if len(o.sights) > 0 {
		c.learnSights(o, now)
	}
	failed, decided, earlier := chainOutcome(o.decidingResults())
	o.earlier = earlier
	if decided {
		o.ds = o.ds1[:0]
		if len(o.events) > 1 {
			o.ds = make([]Decision, 0, len(o.events))
		}
	}
	for _, e := range o.events {
		e.u.lock()
		c.learn(e.u, &o.chain[e.i], o.res[e.i], now)
		if e.decide && decided {
			o.ds = append(o.ds, o.describe(e, failed))
		}
		c.noteUse(e.u, now)
		e.u.mu.Unlock()
	}
}

// earlierTS is the timestamp of the transfer of o's chain that existed
// already (TigerBeetle echoes the original's).
func (o *op) earlierTS() uint64 {
	for _, s := range o.decidingResults() {
		if classify(s.Status) == outAdmitted {
			return s.Timestamp
		}
	}
	return 0
}

// learn teaches u's view what transfer t's result s says. u.mu is held.
func (c *Client) learn(u *user, t *tb.Transfer, s tb.CreateTransferResult, now int64) {
	flags := t.TransferFlags()
	switch {
	case flags.Pending:
		amount, _ := u64(t.Amount)
		switch classify(s.Status) {
		case outAdmitted:
			u.v.Provisioned = true
			if flags.BalancingDebit {
				// A charge (Client.Charge) took at most what remained:
				// what the view knows remained, else it no longer knows.
				amount = u.v.Charged(amount, s.Timestamp)
			} else {
				u.v.Admitted(amount, s.Timestamp)
			}
			u.v.Took(fromTB(t.ID), amount, s.Timestamp+uint64(t.Timeout)*uint64(time.Second))
		case outDenied:
			u.v.Denied(amount, s.Timestamp, now)
			if !u.v.Complete() && !u.v.ScanQueued && now-u.v.ScanLocal >= int64(view.Recheck) {
				u.v.ScanQueued = true // denied, and it does not know when units return
				c.reads.scans.push(u)
			}
		}
	case flags.PostPendingTransfer || flags.VoidPendingTransfer:
		if classifyEnd(s.Status) == endedNow {
			var kept uint64 // a void keeps nothing; a post its amount, all of the hold when it does not fit
			if flags.PostPendingTransfer {
				if n, fits := u64(t.Amount); fits {
					kept = n
				} else {
					kept = math.MaxUint64
				}
			}
			u.v.Ended(fromTB(t.PendingID), kept)
		}
	}
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
	case failed && (classify(s.Status) == outDenied || amount > v.Available(at)):
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
			return classify(o.res[i].Status) == outDenied
		}
	}
	return false
}

// noteUse counts a decision of u and queues u for a read when its view is
// due one. u.mu is held.
func (c *Client) noteUse(u *user, now int64) {
	c.reads.earn(1)
	if u.v.Uses < math.MaxUint16 { // only whether it passed 2 matters
		u.v.Uses++
	}
	if u.v.Queued {
		return
	}
	due := !u.v.Complete()
	if !due && u.v.Uses >= 2 {
		due = now-u.v.ReadLocal >= int64(refreshEvery)
	}
	if due {
		u.v.Queued = true
		c.reads.users.push(u)
	}
}

// batch is what build made of a batch of ops: the transfers to send, and
// the ops and merged groups they belong to, in the order sent; and the
// accounts its sights provision, sent first (see sightings).
type batch struct {
	send  []tb.Transfer
	slots []slot

	accounts []tb.Account
	acctOf   []*user             // the user each account is of
	acctAt   map[tb.Uint128]int  // where each account is in accounts
	acctBad  map[*user]error     // users whose accounts could not be made
	credited map[tb.Uint128]bool // credits the batch carries
}

// slot is an op sent as it is, or a merged group, and where its transfers
// start in the batch.
type slot struct {
	at int
	o  *op
	g  *merged
}

// add appends o's chain to the batch.
func (b *batch) add(o *op) {
	b.slots = append(b.slots, slot{at: len(b.send), o: o})
	b.send = append(b.send, o.chain...)
}

// spread hands each op and group the results of its transfers.
func (b *batch) spread(res []tb.CreateTransferResult) {
	for _, s := range b.slots {
		if s.g != nil {
			s.g.res = res[s.at]
		} else {
			s.o.res = res[s.at : s.at+len(s.o.chain) : s.at+len(s.o.chain)]
			for i := range s.o.sights {
				if sg := &s.o.sights[i]; sg.credited {
					sg.credit = res[sg.at]
				}
			}
		}
	}
}

// build makes the batch's transfers: each op's chain as it is, or, with
// coalescing, one transfer per user for the ops that may be merged, in b's
// buffers.
func (c *Client) build(ops []*op, b *batch) {
	clear(b.slots)
	clear(b.credited)
	b.send, b.slots = b.send[:0], b.slots[:0]
	var merging map[*user][]*op
	if c.coalesce {
		merging = c.mergeable(ops)
	}
	for _, o := range ops {
		if o.local || o.err != nil || o.checks != nil {
			continue
		}
		if o.merge && len(merging[o.events[0].u]) > 1 {
			if g := merging[o.events[0].u]; g[0] == o {
				c.merge(b, o.events[0].u, g) // at the place of the first
			}
			continue
		}
		if len(o.sights) > 0 {
			b.credit(o)
		}
		b.add(o)
	}
}
