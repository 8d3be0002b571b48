package ledger

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/internal/conn"
	"github.com/tblimit/tblimit/ledger/internal/status"
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

// learn teaches u's view what transfer t's result s says. u.mu is held.
func (c *Client) learn(u *user, t *tb.Transfer, s tb.CreateTransferResult, now int64) {
	flags := t.TransferFlags()
	switch {
	case flags.Pending:
		amount, _ := u64(t.Amount)
		switch status.Classify(s.Status) {
		case status.Admitted:
			u.v.Provisioned = true
			if flags.BalancingDebit {
				// A charge (Client.Charge) took at most what remained:
				// what the view knows remained, else it no longer knows.
				amount = u.v.Charged(amount, s.Timestamp)
			} else {
				u.v.Admitted(amount, s.Timestamp)
			}
			u.v.Took(fromTB(t.ID), amount, s.Timestamp+uint64(t.Timeout)*uint64(time.Second))
		case status.Denied:
			u.v.Denied(amount, s.Timestamp, now)
			if !u.v.Complete() && !u.v.ScanQueued && now-u.v.ScanLocal >= int64(view.Recheck) {
				u.v.ScanQueued = true // denied, and it does not know when units return
				c.reads.scans.push(u)
			}
		}
	case flags.PostPendingTransfer || flags.VoidPendingTransfer:
		if status.ClassifyEnd(s.Status) == status.EndedNow {
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

// merged is one user's calls merged into one transfer.
type merged struct {
	u       *user
	members []*op
	t       tb.Transfer
	res     tb.CreateTransferResult
}

// mergeable groups the ops of a batch that coalescing may merge, by user,
// in arrival order.
func (c *Client) mergeable(ops []*op) map[*user][]*op {
	var m map[*user][]*op
	for _, o := range ops {
		if o.merge && !o.local {
			if m == nil {
				m = make(map[*user][]*op)
			}
			u := o.events[0].u
			m[u] = append(m[u], o)
		}
	}
	return m
}

// merge adds to b the transfers of u's mergeable ops: one transfer for
// those that fit, as far as u's view knows, then those that do not fit and
// are not denied locally (a confirmed view), each alone. Every op goes
// alone when the view is not complete.
func (c *Client) merge(b *batch, u *user, ops []*op) {
	now, t := c.nows()
	var in, alone []*op
	var total uint64
	u.lock()
	trusted := u.v.Complete()
	left := u.v.Available(t)
	for _, o := range ops {
		amount, _ := u64(o.chain[0].Amount)
		switch {
		case trusted && amount <= left:
			in = append(in, o)
			left -= amount
			total += amount
		case trusted && u.v.Deny(amount, t, now):
			o.local = true
			o.ds1[0] = localDenial(&u.v, amount, t)
			o.ds = o.ds1[:]
		default:
			alone = append(alone, o)
		}
	}
	u.mu.Unlock()
	switch len(in) {
	case 0:
	case 1:
		b.add(in[0])
	default:
		g := &merged{u: u, members: in, t: newHold(u.res, u.id, total, tb.TransferFlags{})}
		for _, o := range in {
			o.shared = g.t.ID
		}
		b.slots = append(b.slots, slot{at: len(b.send), g: g})
		b.send = append(b.send, g.t)
	}
	for _, o := range alone {
		b.add(o)
	}
}

// settleMerged hands out the answer to a merged transfer: every member is
// admitted when it was created, and sent again alone when it was refused;
// any other answer is each member's own to read.
func (c *Client) settleMerged(g *merged, now int64) {
	u := g.u
	u.lock()
	defer u.mu.Unlock()
	c.learn(u, &g.t, g.res, now)
	switch status.Classify(g.res.Status) {
	case status.Admitted:
		at := g.res.Timestamp
		var later uint64 // the units of the members after this one, reported as if they came one by one
		for j := len(g.members) - 1; j >= 0; j-- {
			o := g.members[j]
			o.ds1[0] = decisionOf(u.v.SpareReport(at, later), true, Admitted, fromTB(g.t.ID), at)
			o.ds = o.ds1[:]
			amount, _ := u64(o.chain[0].Amount)
			later += amount
			c.noteUse(u, now)
		}
	case status.Denied:
		for _, o := range g.members {
			o.retry = true
		}
	default:
		for _, o := range g.members {
			o.res = []tb.CreateTransferResult{g.res}
			o.shared = tb.Uint128{} // undecided: decide reads why from o.res
		}
	}
}

// sightings gathers the accounts of the sights of a batch's ops into
// b.accounts, each once, and notes where each sight's limit account is.
func (b *batch) sightings(ops []*op) {
	clear(b.acctAt)
	clear(b.acctOf)
	b.accounts, b.acctOf = b.accounts[:0], b.acctOf[:0]
	for _, o := range ops {
		if o.local || len(o.sights) == 0 {
			continue
		}
		for i := range o.sights {
			s := &o.sights[i]
			for j, a := range userAccounts(s.u.res, s.u.key) {
				at, ok := b.acctAt[a.ID]
				if !ok {
					if b.acctAt == nil {
						b.acctAt = map[tb.Uint128]int{}
					}
					at = len(b.accounts)
					b.acctAt[a.ID] = at
					b.accounts = append(b.accounts, a)
					b.acctOf = append(b.acctOf, s.u)
				}
				if j == 0 {
					s.acct = at
				}
			}
		}
	}
}

// provisioned reads the answer to a batch's create_accounts: each sight
// learns its limit account's status, and an op whose accounts could not be
// made fails with an error, unsent.
func (b *batch) provisioned(ops []*op, res []tb.CreateAccountResult) {
	for i, r := range res {
		if !status.AccountMade(r.Status) {
			if b.acctBad == nil {
				b.acctBad = map[*user]error{}
			}
			if u := b.acctOf[i]; b.acctBad[u] == nil {
				b.acctBad[u] = fmt.Errorf("ledger: provision %q: %w", u.key, accountStatusError(i, r.Status))
			}
		}
	}
	for _, o := range ops {
		for i := range o.sights {
			s := &o.sights[i]
			s.accounts = res[s.acct].Status
			if err := b.acctBad[s.u]; err != nil && o.err == nil {
				o.err = err
			}
		}
	}
	clear(b.acctBad)
}

// credit adds to b the credits of o's sights that the batch does not carry
// yet, ahead of o's chain.
func (b *batch) credit(o *op) {
	for i := range o.sights {
		s := &o.sights[i]
		t := provisionTransfer(s.u.res, s.u.key, s.limit)
		if b.credited[t.ID] {
			continue // an earlier op of the batch credits it, ahead of this one
		}
		if b.credited == nil {
			b.credited = map[tb.Uint128]bool{}
		}
		b.credited[t.ID] = true
		s.credited, s.at = true, len(b.send)
		b.send = append(b.send, t)
	}
}

// learnSights teaches the views of o's sights what the batch's answer
// says: a user credited (now or before) is provisioned, and one whose
// accounts and credit this batch made knows its limit and holds nothing
// else (its view is complete). It comes before o's holds are learnt, so
// that they are described against the limit.
func (c *Client) learnSights(o *op, now int64) {
	for _, s := range o.sights {
		if !s.credited {
			continue
		}
		cr := status.ClassifyCredit(s.credit.Status)
		if cr == status.CreditFailed {
			continue // its hold fails as well, and decide says why
		}
		s.u.lock()
		v := &s.u.v
		v.Provisioned = true
		switch {
		case status.AccountNew(s.accounts) && cr == status.CreditNow:
			v.KnowLimit(s.limit, now)
		case cr == status.CreditNow:
			// Credited with this limit, now or before: the limit it was
			// given, until a read says whether it changed since.
			v.AssumeLimit(s.limit)
		}
		s.u.mu.Unlock()
	}
}

// answerChecks answers the checks among ops: their users' accounts are
// read in one request (every earlier batch has completed: see Quiet), and
// each check is answered from its user's view. The runner calls it from
// Send.
func (c *Client) answerChecks(ops []*op) {
	var us []*user
	seen := map[*user]bool{}
	for _, o := range ops {
		for _, ch := range o.checks {
			if !seen[ch.u] {
				seen[ch.u] = true
				us = append(us, ch.u)
			}
		}
	}
	if len(us) == 0 {
		return
	}
	err := c.read(c.withCalls(context.Background(), ops, func(o *op) bool { return o.checks != nil }), us)
	t := c.clusterNow()
	for _, o := range ops {
		if o.checks == nil {
			continue
		}
		o.local = true // nothing of it is sent in the batch's create
		if err != nil {
			o.err = err
			continue
		}
		o.ds = make([]Decision, len(o.checks))
		for i, ch := range o.checks {
			o.ds[i], o.err = c.answerCheck(ch, t)
			if o.err != nil {
				break
			}
		}
	}
}

// readExact reads the accounts of the exact ops of a batch just settled and
// describes their decisions again from what the reads show.
func (c *Client) readExact(batch []*op) {
	var us []*user
	seen := map[*user]bool{}
	for _, o := range batch {
		if !o.exact || o.ds == nil || o.local {
			continue
		}
		for _, e := range o.events {
			if e.decide && !seen[e.u] {
				seen[e.u] = true
				us = append(us, e.u)
			}
		}
	}
	if len(us) == 0 {
		return
	}
	c.read(c.withCalls(context.Background(), batch, func(o *op) bool { return o.exact && o.ds != nil && !o.local }), us)
	for _, o := range batch {
		if o.exact && o.ds != nil && !o.local {
			c.redescribe(o)
		}
	}
}

// redescribe describes o's decisions again from its users' views.
func (c *Client) redescribe(o *op) {
	failed, _, _ := chainOutcome(o.decidingResults())
	k := 0
	for _, e := range o.events {
		if !e.decide {
			continue
		}
		e.u.lock()
		o.ds[k] = o.describe(e, failed)
		e.u.mu.Unlock()
		k++
	}
}

// withCalls is ctx, the pipeline's context for a request, carrying for
// the RequestObserver the contexts of the ops of the batch that the
// request serves, those keep accepts: the decisions of a create, the
// checks of a read; none for nil ops, a read of the Client's own (ctx
// itself without an observer).
func (c *Client) withCalls(ctx context.Context, ops []*op, keep func(*op) bool) context.Context {
	if c.requests == nil {
		return ctx
	}
	calls := make([]context.Context, 0, len(ops))
	for _, o := range ops {
		if o.ctx != nil && keep(o) {
			calls = append(calls, o.ctx)
		}
	}
	return context.WithValue(ctx, callsKey{}, calls)
}
