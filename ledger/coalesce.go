package ledger

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// WithCoalescing merges the decisions of one user on one resource that
// arrive while a request for that user is being prepared or is in flight
// into one pending transfer: it asks for their total with balancing_debit,
// which takes as much as is available up to the total, and hands the units
// it got to the waiting callers in arrival order (a caller whose amount no
// longer fits is denied, a later smaller one may still fit). Units not
// handed out are given back at once. A user with a lone caller in a flush
// gets an ordinary pending transfer, which takes the amount or fails and so
// needs no lookup. The flush for different users goes out as one batch.
// With wait 0 (the usual choice) a call that finds nothing in
// flight for its user flushes at once, so only calls that would have queued
// anyway are merged; a positive wait holds each flush back that long (timers
// have the operating system's granularity, often about a millisecond) to
// gather more.
//
// Coalescing is exact: every unit still returns one full window after the
// transfer that admitted it, so at most the limit is admitted in any window,
// as without it. It also denies without any I/O while it knows that a user
// has nothing left: from a flush that drained the account until the first
// unit in flight returns (or, at most, for a second, so that a limit raised
// elsewhere is seen soon).
//
// It applies to Acquire without a Request.ID; a coalesced Decision's ID is
// the shared transfer's, which cannot be used to retry the call.
func WithCoalescing(wait time.Duration) Option {
	return func(c *Client) { c.coalesce = &coalescer{wait: wait, keys: map[ID]*keyQueue{}} }
}

type coalescer struct {
	wait time.Duration

	mu        sync.Mutex
	keys      map[ID]*keyQueue // users with waiters or a flush in flight
	ready     []*keyQueue      // users with waiters and no flush in flight, in arrival order
	scheduled bool             // a flush of ready is scheduled
}

type keyQueue struct {
	account ID
	res     Resource
	waiting []*waiter // arrived, not sent yet
	busy    bool      // a flush for this user is in flight
	queued  bool      // in ready

	provisioned bool // provisioned lazily by this Client: never again
}

type waiter struct {
	req  Request
	d    Decision
	err  error
	done chan struct{}
}

func (c *Client) acquireCoalesced(ctx context.Context, r Resource, req Request) (Decision, error) {
	co := c.coalesce
	uid := UserID(r.Ledger, req.User)
	now := uint64(c.now().UnixNano())
	co.mu.Lock()
	q := co.keys[uid]
	if q == nil {
		q = &keyQueue{account: uid, res: r}
		co.keys[uid] = q
	}
	if d, ok := c.drain.deny(uid, req.Amount, now); ok {
		co.mu.Unlock()
		return d, nil
	}
	w := &waiter{req: req, done: make(chan struct{})}
	q.waiting = append(q.waiting, w)
	lead := co.wait <= 0 && !co.scheduled && !q.busy && !q.queued
	if lead {
		// Nothing to wait for: this caller flushes at once, taking along
		// whatever else is ready.
		q.queued = true
		co.ready = append(co.ready, q)
		co.scheduled = true
	} else {
		co.enqueue(c, q)
	}
	co.mu.Unlock()
	if lead {
		co.flush(c)
	}
	select {
	case <-w.done:
		return w.d, w.err
	case <-ctx.Done():
		// The flush may still take units for this call: conservative.
		d := Decision{Allowed: c.unavailable == FailOpen, Reason: Unavailable}
		if c.unavailable == ReturnError {
			return d, unavailable(context.Cause(ctx))
		}
		return d, nil
	}
}

// enqueue puts q in line for a flush and makes sure one is scheduled. co.mu is held.
func (co *coalescer) enqueue(c *Client, q *keyQueue) {
	if !q.busy && !q.queued && len(q.waiting) > 0 {
		q.queued = true
		co.ready = append(co.ready, q)
	}
	if len(co.ready) > 0 && !co.scheduled {
		co.scheduled = true
		if co.wait <= 0 {
			go co.flush(c)
		} else {
			time.AfterFunc(co.wait, func() { co.flush(c) })
		}
	}
}

// flush sends one balancing pending transfer per waiting user, learns how
// much each got, and hands it out.
func (co *coalescer) flush(c *Client) {
	co.mu.Lock()
	batch := co.ready
	co.ready = nil
	co.scheduled = false
	groups := make([][]*waiter, len(batch))
	for i, q := range batch {
		q.queued, q.busy = false, true
		groups[i], q.waiting = q.waiting, nil
	}
	co.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	retry := c.flushGroups(ctx, batch, groups)

	co.mu.Lock()
	for i, q := range batch {
		q.busy = false
		if retry[i] {
			q.waiting = append(groups[i], q.waiting...)
		}
		if len(q.waiting) == 0 {
			delete(co.keys, q.account)
		} else {
			co.enqueue(c, q)
		}
	}
	co.mu.Unlock()
	for i, g := range groups {
		if !retry[i] {
			for _, w := range g {
				close(w.done)
			}
		}
	}
}

// flushGroups decides for every user of batch; retry[i] reports users that
// were just provisioned lazily and must be sent again.
func (c *Client) flushGroups(ctx context.Context, batch []*keyQueue, groups [][]*waiter) (retry []bool) {
	retry = make([]bool, len(batch))
	fail := func(i int, err error) {
		for _, w := range groups[i] {
			w.err = err
		}
	}
	// A user with one waiter gets an ordinary pending transfer: it takes
	// the whole amount or fails, so its outcome needs no lookup. Several
	// waiters share a balancing one, which takes what is available.
	ts := make([]tb.Transfer, len(batch))
	for i, q := range batch {
		var total uint64
		for _, w := range groups[i] {
			total = min(total+w.req.Amount, math.MaxInt64)
		}
		ts[i] = hold(q.res, q.account, total, tb.TransferFlags{BalancingDebit: len(groups[i]) > 1})
	}
	res, err := c.createTransfers(ctx, ts)
	if err != nil {
		for i := range batch {
			fail(i, err)
		}
		return retry
	}
	// Learn what each balancing transfer got (the create result has no
	// amount) and the balances after the batch: at most two batched
	// lookups per flush.
	var created []tb.Uint128
	accounts := make([]ID, len(batch))
	for i, s := range res {
		accounts[i] = batch[i].account
		if s.Status == tb.TransferCreated && len(groups[i]) > 1 {
			created = append(created, ts[i].ID)
		}
	}
	var got []tb.Transfer
	if len(created) > 0 {
		got, err = lookup(ctx, c, created, c.tb.LookupTransfers)
	}
	if err == nil && len(got) != len(created) {
		err = fmt.Errorf("ledger: %d of %d coalesced transfers found", len(got), len(created))
	}
	var found []tb.Account
	if err == nil {
		found, err = c.lookupAccounts(ctx, accounts...)
	}
	if err != nil {
		for i := range batch {
			fail(i, err)
		}
		return retry
	}
	balances := matchAccounts(accounts, found)
	var giveBack []tb.Transfer
	k := 0
	for i, s := range res {
		q, g := batch[i], groups[i]
		asked, _ := u64(ts[i].Amount)
		var granted uint64
		switch s.Status {
		case tb.TransferCreated:
			granted = asked
			if len(g) > 1 {
				granted, _ = u64(got[k].Amount)
				k++
			}
		case tb.TransferExceedsCredits:
			if len(g) > 1 {
				fail(i, transferStatusError(i, s.Status))
				continue
			}
		case tb.TransferDebitAccountNotFound:
			if q.res.Lazy && !q.provisioned {
				q.provisioned = true
				err := c.provision(ctx, q.res, []UserLimit{{Key: g[0].req.User, Limit: q.res.DefaultLimit}}, false)
				if err != nil {
					fail(i, err)
				} else {
					retry[i] = true
				}
				continue
			}
			fail(i, c.missing(ctx, q.res, g[0].req.User))
			continue
		case tb.TransferCreditAccountNotFound:
			fail(i, fmt.Errorf("%w: no resource on ledger %d", ErrUnknownResource, q.res.Ledger))
			continue
		default:
			fail(i, transferStatusError(i, s.Status))
			continue
		}
		b, err := balanceOf(balances[i])
		if err != nil {
			fail(i, err)
			continue
		}
		left := granted
		for _, w := range g {
			w.d = Decision{ID: fromTB(ts[i].ID), Timestamp: s.Timestamp, Limit: b.Limit, ResetAfter: q.res.Window}
			if w.req.Amount <= left {
				w.d.Allowed = true
				left -= w.req.Amount
			} else {
				w.d.Reason = LimitExceeded
			}
		}
		if left > 0 {
			// Give back what no caller could use: void the transfer and
			// take again what was handed out, in one linked chain.
			giveBack = append(giveBack, c.regrant(ts[i], granted-left)...)
			b.Available += left
		}
		// Remaining after each caller, as if they had been served one by one.
		after := b.Available
		for j := len(g) - 1; j >= 0; j-- {
			g[j].d.Remaining = after
			if g[j].d.Allowed {
				after += g[j].req.Amount
			}
		}
		if b.Available == 0 || granted < asked {
			c.learnDrained(ctx, q, g, b, s.Timestamp)
		}
	}
	if len(giveBack) > 0 {
		if res, err := c.createTransfers(ctx, giveBack); err == nil {
			for j, s := range res {
				if s.Status != tb.TransferCreated && s.Status != tb.TransferLinkedEventFailed {
					_ = j // the units stay held until they expire: conservative
				}
			}
		}
	}
	return retry
}

// regrant returns the chain that voids pending transfer t and takes used of
// its units again for a whole window.
func (c *Client) regrant(t tb.Transfer, used uint64) []tb.Transfer {
	void := tb.Transfer{
		ID:              endID(roleCancel, fromTB(t.ID)).tb(),
		PendingID:       t.ID,
		DebitAccountID:  t.DebitAccountID,
		CreditAccountID: t.CreditAccountID,
		Ledger:          t.Ledger,
		Code:            t.Code,
		Flags:           tb.TransferFlags{VoidPendingTransfer: true}.ToUint16(),
	}
	if used == 0 {
		return []tb.Transfer{void}
	}
	void.Flags = tb.TransferFlags{VoidPendingTransfer: true, Linked: true}.ToUint16()
	again := t
	again.ID = NewID().tb()
	again.Timestamp = 0 // t may be the stored transfer
	again.Amount = tb.ToUint128(used)
	again.Flags = tb.TransferFlags{Pending: true}.ToUint16()
	return []tb.Transfer{void, again}
}

// learnDrained fills in when enough units return for the denied callers of
// a drained account, and remembers the account as drained until its first
// unit returns, so that later calls are denied without I/O.
func (c *Client) learnDrained(ctx context.Context, q *keyQueue, g []*waiter, b balance, now uint64) {
	var want uint64
	for _, w := range g {
		if !w.d.Allowed {
			want = max(want, min(w.req.Amount, b.Limit))
		}
	}
	flights, err := c.inFlight(ctx, q.account, q.res.Window, now, max(want, 1), false)
	if err != nil {
		return
	}
	for _, w := range g {
		if w.d.Allowed {
			continue
		}
		switch {
		case w.req.Amount > b.Limit:
			w.d.RetryAfter = -1
		case w.req.Amount > b.Available:
			w.d.RetryAfter = max(releaseAfter(flights, now, w.req.Amount-b.Available), 0)
		}
	}
	if b.Available > 0 || len(flights) == 0 {
		return
	}
	last, err := c.lastExpiry(ctx, q.account, q.res.Window, now)
	if err != nil {
		return
	}
	c.drain.learn(q.account, b.Limit, flights, last, now, uint64(c.now().UnixNano()), c.denyCacheBound())
}
