package ledger

import (
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// WithCoalescing merges the decisions of one user that go to the cluster in
// the same batch (the calls that arrived while the previous batch was in
// flight) into one pending transfer for the units of those that fit, when
// the Client's view of the user knows every unit in flight: one transfer,
// stored for ever, instead of one per call. The callers share that
// transfer: each Decision's ID is the shared transfer's, which cannot be
// used to retry the call. A call that does not fit is denied without being
// sent when the cluster confirmed the user's view within the last second,
// and is sent on its own otherwise; so is every call of a user whose view
// is not complete (another process took units it does not know of). If the
// cluster refuses a merged transfer (another process took units since),
// its calls are sent again on their own. A positive wait holds each batch
// back that long to gather more calls (timers have the operating system's
// granularity, often about a millisecond); 0 sends a batch as soon as the
// previous one is answered.
//
// Coalescing is exact: every unit still returns one full window after the
// transfer that admitted it, so at most the limit is admitted in any
// window, as without it.
//
// It applies to Acquire, and AcquireAll of one part, without a Request.ID
// or Ref; not with WithExactDecisions, nor to the calls WithLeases serves
// or renews (see New). Such a call whose answer is lost (ErrUnavailable)
// has no ID to be retried by (AttemptID reports none): it may have been
// admitted by a transfer shared with others, so a retry is a new request.
// Give calls an ID when a retry must not count twice.
func WithCoalescing(wait time.Duration) Option {
	return func(c *Client) { c.coalesce, c.gather = true, wait }
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
	switch classify(g.res.Status) {
	case outAdmitted:
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
	case outDenied:
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
