// Package pipeline is a Client's decision pipeline. Every call that takes,
// ends or pays (Acquire, AcquireAll, Pay, Reserve and its Commit and
// Cancel, a lease's renewal and give-back) is an Op: a chain of transfers
// to create and the users whose holds it takes or ends. Ops wait in a
// conn.Batcher and go to the cluster in batches, one request in flight at
// a time, as one create request: one round trip for every op of the
// batch, as a TigerBeetle client would send them. The batch's runner then
// completes it while the next batch is in flight: it reads each answer,
// has the Host teach its users' views what happened, and has it describe
// every decision from them, so that no decision needs a read of its own.
// Reads wait for quiet: no batch in flight and every earlier one
// completed.
//
// Batches differ only in how they are built: plainly (each op's chain as
// it is) or, coalescing, merging the single holds of one user into one
// transfer.
//
// The pipeline knows users (U) and decisions (D) only as the Host's: what
// a view knows and what a decision says are package ledger's. New is the
// one place an Op is made; package ledger names one in decide.go only.
package pipeline

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/internal/conn"
	"github.com/tblimit/tblimit/ledger/internal/status"
)

// Host is what a Pipeline asks of its Client: what it knows of its users
// (U, each one value for as long as the Client keeps it) and how it
// answers (D). The runner calls it one batch at a time, from Send or
// Complete (see Pipeline).
type Host[U comparable, D any] interface {
	// Nows reads the Client's clock once: its own, in nanoseconds, and the
	// cluster's as estimated from it.
	Nows() (local int64, cluster uint64)
	// Clock learns the cluster's clock: the latest timestamp of a batch's
	// answer, and the Client's clock when the answer came.
	Clock(last uint64, local int64)
	// ReadsDue reports whether views are due a read (see Refresh).
	ReadsDue() bool
	// Refresh makes the reads views are due, before a batch sent with
	// every earlier batch completed.
	Refresh()
	// Read reads the accounts of us into their views. ctx carries the
	// calls the read serves (see Calls).
	Read(ctx context.Context, us []U) error
	// Check answers ch at cluster time t from its user's view, just read.
	Check(ch Check[U], t uint64) (D, error)

	// Accounts are the accounts a sight of u creates, its limit account
	// first.
	Accounts(u U) []tb.Account
	// AccountError is the error of the calls that provision u, whose
	// account, event i of the batch's create_accounts, answered s.
	AccountError(u U, i int, s tb.CreateAccountStatus) error
	// Credit is the transfer that credits u's limit account with limit.
	Credit(u U, limit uint64) tb.Transfer
	// Sighted teaches u what the answer to its sight says (its limit
	// account's status, its credit's result), before its holds are
	// settled.
	Sighted(u U, limit uint64, account tb.CreateAccountStatus, credit tb.CreateTransferResult, local int64)

	// Settle teaches each user of events (the holds and ends of holds of
	// chain, whose results are res) what its result says, counts the use,
	// and appends to ds the decision of each deciding hold when
	// out.Decided, from its user's view just after its own result.
	Settle(events []Event[U], chain []tb.Transfer, res []tb.CreateTransferResult, out Outcome, local int64, ds []D) []D
	// Describe sets ds[k] to the decision of the k-th deciding hold of
	// events again, from its user's view (after a read).
	Describe(events []Event[U], chain []tb.Transfer, res []tb.CreateTransferResult, out Outcome, ds []D)

	// Merge decides how coalescing sends one user's mergeable holds of a
	// batch, of amounts (in arrival order): in[i] if hold i goes in one
	// merged transfer, else ds[i] is set if it is denied without being
	// sent, else it goes alone. It returns the merged transfer when two or
	// more go in it.
	Merge(u U, amounts []uint64, in []bool, denied []bool, ds []D) (merged tb.Transfer)
	// SettleMerged teaches u what result s of merged transfer t says, and,
	// if ds is not nil (it was created), sets the decision of each of its
	// holds, of amounts.
	SettleMerged(u U, t *tb.Transfer, s tb.CreateTransferResult, amounts []uint64, local int64, ds []D)

	// Marker is the marker of request ID key for chain (see NewAttempt).
	Marker(key tb.Uint128, chain []tb.Transfer) tb.Transfer
	// NewID returns a new transfer ID.
	NewID() tb.Uint128
}

// Config is how a Pipeline batches.
type Config struct {
	Coalesce   bool          // merge one user's single holds of a batch
	Gather     time.Duration // hold each batch back this long to gather more calls
	MaxWaiting int           // calls that may wait for a batch (see conn.NewBatcher)
	Observed   bool          // each request's context carries the calls it serves (see Calls)
}

// Pipeline is a Client's pipeline: its Batcher, the ops free for reuse,
// and the state of its batches, which the Batcher's runner and the
// completion of a batch (which may overlap the next Send) each use their
// own part of, and never the same field at once (see runner).
type Pipeline[U comparable, D any] struct {
	// Set by Start, and read by every call: kept apart from what the
	// runner writes for every batch.
	batcher *conn.Batcher[*Op[U, D]]
	host    Host[U, D]
	conn    *conn.Conn
	cfg     Config
	ops     sync.Pool // ops free for reuse (see New)

	batches   [2]sentBatch[U, D] // one in flight, one completing (see Send)
	turn      int                // the next batch's, in batches
	lastExact bool               // the last batch answered reads its accounts (see Quiet)
	checking  atomic.Int64       // checks waiting for a read (see Quiet)
}

// Start makes p's Batcher: p sends through c, asks host, and batches as
// cfg says.
func (p *Pipeline[U, D]) Start(host Host[U, D], c *conn.Conn, cfg Config) {
	p.host, p.conn, p.cfg = host, c, cfg
	p.batcher = conn.NewBatcher[*Op[U, D]](runner[U, D]{p}, c.InProcess(), cfg.Gather, cfg.MaxWaiting)
}

// New returns the op of a call that spec and steps (its chain, in order)
// describe: the one place an op is made. An op is large (room for a
// transfer, its event and its decision) and every decision that is sent
// needs one: a free one is reused (see Free), which spares an allocation
// per decision and the garbage collector's work on it.
func (p *Pipeline[U, D]) New(spec Spec, steps []Step[U]) *Op[U, D] {
	o, _ := p.ops.Get().(*Op[U, D])
	if o == nil {
		o = new(Op[U, D])
	}
	o.key, o.exact, o.pays, o.Merge, o.spare = spec.Key, spec.Exact, spec.Pays, spec.Merge, spec.Spare
	if len(steps) > 0 {
		o.Chain, o.Events = o.chain1[:0], o.events1[:0]
	}
	var none U
	for i := range steps {
		st := &steps[i] // steps are large: not copied
		if st.User != none {
			o.Events = append(o.Events, Event[U]{I: len(o.Chain), User: st.User, Decide: st.Decide})
		}
		o.Chain = append(o.Chain, st.T)
	}
	return o
}

// Free makes o free for reuse if the pipeline is done with it (an op whose
// caller stopped waiting may still be in a batch, and is left to the
// garbage collector). The caller must hold nothing that points into o: its
// chain, its results, its decisions. o may be nil.
func (p *Pipeline[U, D]) Free(o *Op[U, D]) {
	if o == nil || !o.Answered {
		return
	}
	*o = Op[U, D]{}
	p.ops.Put(o)
}

// Submit sends o through the pipeline and waits for its answer, or for
// ctx (with the connection's default timeout if it has no deadline). An
// error wraps the connection's unavailable error when the answer did not
// come: o may still be applied then, and the pipeline may still be using
// it, so the caller must not read its answer.
func (p *Pipeline[U, D]) Submit(ctx context.Context, o *Op[U, D]) error {
	var wait time.Duration
	if !p.conn.InProcess() { // an in-process engine answers at once
		wait = p.conn.Wait(ctx)
	}
	o.ctx = ctx
	if _, err := p.batcher.Do(ctx, wait, o); err != nil {
		return p.conn.NoAnswer(err)
	}
	return o.err
}

// Checks answers checks: once every earlier batch has completed, the
// runner reads their users' accounts (with those of the other checks in
// flight, in one request) and the Host answers each from its user's view.
// It returns one decision per check, or Submit's error.
func (p *Pipeline[U, D]) Checks(ctx context.Context, checks []Check[U]) ([]D, error) {
	o := p.New(Spec{}, nil)
	o.checks = checks
	p.checking.Add(1)
	defer p.checking.Add(-1)
	for {
		if err := p.Submit(ctx, o); err != nil {
			return nil, err
		}
		if !o.Retry {
			o.Answered = true
			ds := o.Ds
			p.Free(o)
			return ds, nil
		}
		o.Reset() // sent while a batch was completing: again, once quiet
	}
}

// patient is the context of the runner's requests (see Send).
var patient = conn.Patient(context.Background())

// runner runs the pipeline's batches for the Batcher (see conn.Runner): a
// batch's transfers are built (plain or coalesced) and sent as one create,
// and, while the next batch is in flight, the batch is completed from the
// answer, every op settled. The Batcher calls Send and Quiet from one
// goroutine at a time, and a batch's Complete either from that goroutine
// or from one of its own while the next batch's Send waits for its answer:
// Send touches nothing Complete does (the views, the read queues, the
// clock) unless every earlier batch has completed.
type runner[U comparable, D any] struct{ p *Pipeline[U, D] }

// sentBatch is a batch of ops whose answer came.
type sentBatch[U comparable, D any] struct {
	p     *Pipeline[U, D]
	ops   []*Op[U, D]
	b     batch[U, D] // its transfers, in buffers reused from batch to batch
	exact bool        // some op reads its accounts before answering
	res   []tb.CreateTransferResult
	err   error
	now   int64 // the Client's clock when the answer came
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
func (r runner[U, D]) Send(ops []*Op[U, D], settled bool, more func(keep func(*Op[U, D]) bool) []*Op[U, D]) conn.Flight {
	p := r.p
	if settled {
		p.host.Refresh()
		if p.checking.Load() > 0 { // every op with checks is counted there
			p.answerChecks(ops)
		}
	} else {
		for _, o := range ops {
			o.Retry = o.Retry || o.checks != nil // read once quiet (see Quiet)
		}
	}
	f := &p.batches[p.turn] // reused: one in flight, one completing
	p.turn ^= 1
	*f = sentBatch[U, D]{p: p, ops: ops, b: f.b}
	if f.b.sightings(p.host, ops); len(f.b.accounts) > 0 {
		provisions := func(o *Op[U, D]) bool { return len(o.sights) > 0 }
		ares, err := p.conn.CreateAccountsAhead(p.withCalls(patient, ops, provisions), f.b.accounts)
		if err != nil {
			f.err = err
			return f
		}
		f.b.provisioned(p.host, ops, ares)
		// The calls that came while the accounts were made ride on this
		// batch's create, as they would on a TigerBeetle client's next
		// request, rather than wait for the next batch's: those that need
		// nothing before their holds.
		if extra := more(rides); len(extra) > 0 {
			ops = append(ops[:len(ops):len(ops)], extra...)
			f.ops = ops
		}
	}
	p.build(ops, &f.b)
	for _, o := range ops {
		f.exact = f.exact || o.exact
	}
	p.lastExact = f.exact
	if len(f.b.send) > 0 {
		f.res, f.err = p.conn.CreateTransfers(p.withCalls(patient, ops, inCreate), f.b.send)
	}
	f.now, _ = p.host.Nows()
	return f
}

// inCreate reports whether build put op o's transfers in its batch's create
// (alone or merged).
func inCreate[U comparable, D any](o *Op[U, D]) bool {
	return !o.Local && o.err == nil && o.checks == nil
}

// rides reports whether op o, come while a batch's accounts were made, may
// join its create: it provisions no user, checks nothing, and reads
// nothing after its create.
func rides[U comparable, D any](o *Op[U, D]) bool {
	return len(o.sights) == 0 && o.checks == nil && !o.exact
}

// Quiet asks the Batcher to complete a batch before sending the next when
// the next must see its effects: a read is due or a check waits (a read
// must follow the writes of every batch before it, and find their holds in
// the views), the last batch reads its accounts before answering, or
// coalescing merges the next batch's holds by what the views know.
func (r runner[U, D]) Quiet() bool {
	p := r.p
	return p.cfg.Coalesce || p.lastExact || p.host.ReadsDue() || p.checking.Load() > 0
}

// Complete settles every op of f from the answer.
func (f *sentBatch[U, D]) Complete() {
	p, b := f.p, &f.b
	if f.err != nil {
		for _, o := range f.ops {
			if !o.Local {
				o.err = f.err
			}
		}
		return
	}
	if len(b.send) > 0 {
		var last uint64
		for _, r := range f.res {
			last = max(last, r.Timestamp)
		}
		p.host.Clock(last, f.now)
		b.spread(f.res)
	}
	for _, s := range b.slots {
		if s.g != nil {
			p.settleMerged(s.g, f.now)
		} else {
			p.settle(s.o, f.now)
		}
	}
	if f.exact {
		p.readExact(f.ops)
	}
}

// settle reads the answer to o's chain: every hold and end of a hold
// teaches its user's view, and each deciding hold is described.
func (p *Pipeline[U, D]) settle(o *Op[U, D], now int64) {
	for i := range o.sights {
		if s := &o.sights[i]; s.credited {
			p.host.Sighted(s.u, s.limit, s.accounts, s.credit, now)
		}
	}
	out := o.outcome()
	o.Earlier = out.Earlier != 0
	var ds []D
	if out.Decided {
		ds = o.ds1[:0]
		if len(o.Events) > 1 {
			ds = make([]D, 0, len(o.Events))
		}
	}
	o.Ds = p.host.Settle(o.Events, o.Chain, o.Res, out, now, ds)
}

// Redescribe describes o's decisions again from its users' views (after
// reads).
func (p *Pipeline[U, D]) Redescribe(o *Op[U, D]) {
	p.host.Describe(o.Events, o.Chain, o.Res, o.outcome(), o.Ds)
}

// batch is what build made of a batch of ops: the transfers to send, and
// the ops and merged groups they belong to, in the order sent; and the
// accounts its sights provision, sent first (see sightings).
type batch[U comparable, D any] struct {
	send  []tb.Transfer
	slots []slot[U, D]

	accounts []tb.Account
	acctOf   []U                 // the user each account is of
	acctAt   map[tb.Uint128]int  // where each account is in accounts
	acctBad  map[U]error         // users whose accounts could not be made
	credited map[tb.Uint128]bool // credits the batch carries
}

// slot is an op sent as it is, or a merged group, and where its transfers
// start in the batch.
type slot[U comparable, D any] struct {
	at int
	o  *Op[U, D]
	g  *merged[U, D]
}

// add appends o's chain to the batch.
func (b *batch[U, D]) add(o *Op[U, D]) {
	b.slots = append(b.slots, slot[U, D]{at: len(b.send), o: o})
	b.send = append(b.send, o.Chain...)
}

// spread hands each op and group the results of its transfers.
func (b *batch[U, D]) spread(res []tb.CreateTransferResult) {
	for _, s := range b.slots {
		if s.g != nil {
			s.g.res = res[s.at]
		} else {
			s.o.Res = res[s.at : s.at+len(s.o.Chain) : s.at+len(s.o.Chain)]
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
func (p *Pipeline[U, D]) build(ops []*Op[U, D], b *batch[U, D]) {
	clear(b.slots)
	clear(b.credited)
	b.send, b.slots = b.send[:0], b.slots[:0]
	var merging map[U][]*Op[U, D]
	if p.cfg.Coalesce {
		merging = mergeable(ops)
	}
	for _, o := range ops {
		if o.Local || o.err != nil || o.checks != nil {
			continue
		}
		if o.Merge && len(merging[o.Events[0].User]) > 1 {
			if g := merging[o.Events[0].User]; g[0] == o {
				p.merge(b, o.Events[0].User, g) // at the place of the first
			}
			continue
		}
		if len(o.sights) > 0 {
			b.credit(p.host, o)
		}
		b.add(o)
	}
}

// merged is one user's calls merged into one transfer.
type merged[U comparable, D any] struct {
	u       U
	members []*Op[U, D]
	amounts []uint64 // of members, in order
	t       tb.Transfer
	res     tb.CreateTransferResult
}

// mergeable groups the ops of a batch that coalescing may merge, by user,
// in arrival order.
func mergeable[U comparable, D any](ops []*Op[U, D]) map[U][]*Op[U, D] {
	var m map[U][]*Op[U, D]
	for _, o := range ops {
		if o.Merge && !o.Local {
			if m == nil {
				m = make(map[U][]*Op[U, D])
			}
			u := o.Events[0].User
			m[u] = append(m[u], o)
		}
	}
	return m
}

// merge adds to b the transfers of u's mergeable ops: one transfer for
// those that fit, as far as u's view knows, then those that do not fit and
// are not denied locally (a confirmed view), each alone (see Host.Merge).
func (p *Pipeline[U, D]) merge(b *batch[U, D], u U, ops []*Op[U, D]) {
	amounts := make([]uint64, len(ops))
	for i, o := range ops {
		amounts[i], _ = o.Chain[0].Amount.Uint64() // the low 64 bits: a call asks for at most MaxInt64
	}
	in, denied, ds := make([]bool, len(ops)), make([]bool, len(ops)), make([]D, len(ops))
	t := p.host.Merge(u, amounts, in, denied, ds)
	var members []*Op[U, D]
	var kept []uint64 // the members' amounts
	for i, o := range ops {
		switch {
		case in[i]:
			members = append(members, o)
			kept = append(kept, amounts[i])
		case denied[i]:
			o.Local = true
			o.ds1[0] = ds[i]
			o.Ds = o.ds1[:]
		}
	}
	switch len(members) {
	case 0:
	case 1:
		b.add(members[0])
	default:
		g := &merged[U, D]{u: u, members: members, amounts: kept, t: t}
		for _, o := range members {
			o.shared = g.t.ID
		}
		b.slots = append(b.slots, slot[U, D]{at: len(b.send), g: g})
		b.send = append(b.send, g.t)
	}
	for i, o := range ops {
		if !in[i] && !denied[i] {
			b.add(o)
		}
	}
}

// settleMerged hands out the answer to a merged transfer: every member is
// admitted when it was created, and sent again alone when it was refused;
// any other answer is each member's own to read.
func (p *Pipeline[U, D]) settleMerged(g *merged[U, D], now int64) {
	out := status.Classify(g.res.Status)
	var ds []D
	if out == status.Admitted {
		ds = make([]D, len(g.members))
	}
	p.host.SettleMerged(g.u, &g.t, g.res, g.amounts, now, ds)
	switch out {
	case status.Admitted:
		for i, o := range g.members {
			o.ds1[0] = ds[i]
			o.Ds = o.ds1[:]
		}
	case status.Denied:
		for _, o := range g.members {
			o.Retry = true
		}
	default:
		for _, o := range g.members {
			o.Res = []tb.CreateTransferResult{g.res}
			o.shared = tb.Uint128{} // undecided: the caller reads why from its results
		}
	}
}

// sightings gathers the accounts of the sights of a batch's ops into
// b.accounts, each once, and notes where each sight's limit account is.
func (b *batch[U, D]) sightings(host Host[U, D], ops []*Op[U, D]) {
	clear(b.acctAt)
	clear(b.acctOf)
	b.accounts, b.acctOf = b.accounts[:0], b.acctOf[:0]
	for _, o := range ops {
		if o.Local || len(o.sights) == 0 {
			continue
		}
		for i := range o.sights {
			s := &o.sights[i]
			for j, a := range host.Accounts(s.u) {
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
func (b *batch[U, D]) provisioned(host Host[U, D], ops []*Op[U, D], res []tb.CreateAccountResult) {
	for i, r := range res {
		if !status.AccountMade(r.Status) {
			if b.acctBad == nil {
				b.acctBad = map[U]error{}
			}
			if u := b.acctOf[i]; b.acctBad[u] == nil {
				b.acctBad[u] = host.AccountError(u, i, r.Status)
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
func (b *batch[U, D]) credit(host Host[U, D], o *Op[U, D]) {
	for i := range o.sights {
		s := &o.sights[i]
		t := host.Credit(s.u, s.limit)
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

// answerChecks answers the checks among ops: their users' accounts are
// read in one request (every earlier batch has completed: see Quiet), and
// each check is answered from its user's view.
func (p *Pipeline[U, D]) answerChecks(ops []*Op[U, D]) {
	var us []U
	seen := map[U]bool{}
	for _, o := range ops {
		for _, ch := range o.checks {
			if !seen[ch.User] {
				seen[ch.User] = true
				us = append(us, ch.User)
			}
		}
	}
	if len(us) == 0 {
		return
	}
	err := p.host.Read(p.withCalls(context.Background(), ops, func(o *Op[U, D]) bool { return o.checks != nil }), us)
	_, t := p.host.Nows()
	for _, o := range ops {
		if o.checks == nil {
			continue
		}
		o.Local = true // nothing of it is sent in the batch's create
		if err != nil {
			o.err = err
			continue
		}
		o.Ds = make([]D, len(o.checks))
		for i, ch := range o.checks {
			o.Ds[i], o.err = p.host.Check(ch, t)
			if o.err != nil {
				break
			}
		}
	}
}

// readExact reads the accounts of the exact ops of a batch just settled and
// describes their decisions again from what the reads show.
func (p *Pipeline[U, D]) readExact(ops []*Op[U, D]) {
	var us []U
	seen := map[U]bool{}
	for _, o := range ops {
		if !o.exact || o.Ds == nil || o.Local {
			continue
		}
		for _, e := range o.Events {
			if e.Decide && !seen[e.User] {
				seen[e.User] = true
				us = append(us, e.User)
			}
		}
	}
	if len(us) == 0 {
		return
	}
	exact := func(o *Op[U, D]) bool { return o.exact && o.Ds != nil && !o.Local }
	_ = p.host.Read(p.withCalls(context.Background(), ops, exact), us) // a failed read leaves the decisions as settled
	for _, o := range ops {
		if exact(o) {
			p.Redescribe(o)
		}
	}
}

// callsKey is the context value of a batch's request that holds its calls'
// contexts (see Calls).
type callsKey struct{}

// withCalls is ctx, the pipeline's context for a request, carrying the
// contexts of the ops of the batch that the request serves, those keep
// accepts (the decisions of a create, the checks of a read), when the
// Config asks for them (ctx itself otherwise).
func (p *Pipeline[U, D]) withCalls(ctx context.Context, ops []*Op[U, D], keep func(*Op[U, D]) bool) context.Context {
	if !p.cfg.Observed {
		return ctx
	}
	calls := make([]context.Context, 0, len(ops))
	for _, o := range ops {
		if o.ctx != nil && keep(o) {
			calls = append(calls, o.ctx)
		}
	}
	return WithCalls(ctx, calls)
}

// WithCalls is ctx carrying calls, the contexts of the calls a request
// serves (none for a read of the Client's own).
func WithCalls(ctx context.Context, calls []context.Context) context.Context {
	return context.WithValue(ctx, callsKey{}, calls)
}

// Calls returns the contexts of the calls the request of ctx serves, and
// whether ctx is a request's of a pipeline whose Config asks for them.
func Calls(ctx context.Context) ([]context.Context, bool) {
	calls, ok := ctx.Value(callsKey{}).([]context.Context)
	return calls, ok
}
