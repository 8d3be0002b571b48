package ledger

import (
	"context"
	"slices"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Reads that keep views true. A Client reads a user's account (one
// lookup_accounts event, batched with the other users due a read) when the
// cluster contradicted its view, when it does not know the user's limit or
// everything in flight, and every refreshEvery while the user is in use; in
// all, at most one account per readRatio decisions. Reads go out between two
// batches of the pipeline, so that the Client knows exactly which of its own
// holds a read saw; nobody waits for them (WithExactDecisions aside). On a
// cluster, where a request costs a turn of the one the client keeps in
// flight, reads and scans go out at most once per readGap each, whatever
// their budget: at most a few percent of the requests.

const (
	// readRatio: a Client reads at most one account per readRatio
	// decisions it sends.
	readRatio = 16
	// refreshEvery: a user in use is read again after this long, within the
	// budget, so that what other processes did shows in its decisions.
	refreshEvery = time.Second
	// scanRatio: a Client scans the transfers of at most one user per
	// scanRatio decisions it sends.
	scanRatio = 64
	// scanMaxUnits: a user with more units in flight is not scanned (a
	// scan reads every hold in flight, and its view stays incomplete).
	scanMaxUnits = BatchMax
	// readGap: on a cluster, the least time between two read requests, and
	// between two scans.
	readGap = 50 * time.Millisecond
)

// readQueue holds the users due a read, those due a scan of their
// transfers, and the budget of both. Only the pipeline uses it: a batch's
// completion fills it, and a Send that follows every completion reads it
// (see package internal/pipeline).
type readQueue struct {
	users      fifo
	budget     float64
	scans      fifo
	scanBudget float64
	// When the last read and scan went out (time.Now, not the Client's
	// clock, which tests may stop): see readGap.
	lastRead, lastScan time.Time
}

// gapPassed reports whether a read may go out now, the last one having
// gone out at last.
func (c *Client) gapPassed(last time.Time) bool {
	return c.conn.InProcess() || time.Since(last) >= readGap // a read costs a turn only on a cluster
}

// readDue reports whether readBack would read now: users wait, the budget
// allows one, and the last read went out long enough ago.
func (c *Client) readDue() bool {
	q := &c.reads
	return q.users.len() > 0 && int(q.budget) > 0 && c.gapPassed(q.lastRead)
}

// scanDue reports whether scanBack would scan now (see readDue).
func (c *Client) scanDue() bool {
	q := &c.reads
	return q.scans.len() > 0 && q.scanBudget >= 1 && c.gapPassed(q.lastScan)
}

// readsDue reports whether readBack or scanBack would send a read now.
func (c *Client) readsDue() bool { return c.readDue() || c.scanDue() }

// fifo is a queue of users whose pops do not move the users left in it:
// a queue of many users due a read costs nothing per batch.
type fifo struct {
	s    []*user
	head int
}

func (f *fifo) push(u *user) { f.s = append(f.s, u) }

func (f *fifo) len() int { return len(f.s) - f.head }

// pop removes the first n users and returns them in a new slice.
func (f *fifo) pop(n int) []*user {
	us := slices.Clone(f.s[f.head : f.head+n])
	clear(f.s[f.head : f.head+n]) // the table may drop them meanwhile
	f.head += n
	if f.head >= len(f.s)/2 { // amortised: each user is moved at most once
		f.s = f.s[:copy(f.s, f.s[f.head:])]
		f.head = 0
	}
	return us
}

// earn adds the budget of n decisions.
func (q *readQueue) earn(n int) {
	q.budget = min(q.budget+float64(n)/readRatio, BatchMax)
	q.scanBudget = min(q.scanBudget+float64(n)/scanRatio, 1)
}

// readBack reads the users due a read, as many as the budget allows. The
// pipeline's runner calls it between batches.
func (c *Client) readBack() {
	if !c.readDue() {
		return
	}
	q := &c.reads
	q.lastRead = time.Now()
	n := min(q.users.len(), int(q.budget))
	us := q.users.pop(n)
	q.budget -= float64(n)
	c.read(c.ownRead(), us)
}

// scanBack scans the transfers of a user that was denied while its view did
// not know when the units in flight return (other processes hold them), if
// the budget allows: its view then knows every hold in flight, so that
// RetryAfter is exact and the user is denied locally while drained, as in
// one process. Each user is scanned at most once per view.Recheck. Only the
// pipeline's runner calls it, between batches.
func (c *Client) scanBack() {
	if !c.scanDue() {
		return
	}
	q := &c.reads
	q.lastScan = time.Now()
	u := q.scans.pop(1)[0]
	q.scanBudget--
	c.read(c.ownRead(), []*user{u}) // the limit, and whether the view still lacks units
	u.lock()
	u.v.ScanQueued = false
	u.v.ScanLocal = c.localNow()
	need := !u.v.Complete() && u.v.InFlight(c.lastTS) <= scanMaxUnits
	window := u.res.Window
	u.mu.Unlock()
	if !need {
		return
	}
	t := c.lastTS
	ctx, cancel := context.WithTimeout(c.ownRead(), c.conn.Timeout())
	flights, err := c.readFlights(ctx, u.id, maxTimeout(window), t, 0, true)
	cancel()
	if err != nil {
		return
	}
	u.lock()
	u.v.Scanned(holdsOf(flights), t)
	u.mu.Unlock()
}

// read looks up the accounts of us and teaches their views what they show,
// within the Client's timeout of ctx (a context that carries, for a
// RequestObserver, the calls the read serves, if any: see pipeline.Calls).
// Only the pipeline's runner calls it, between batches.
func (c *Client) read(ctx context.Context, us []*user) error {
	ids := make([]tb.Uint128, len(us))
	for i, u := range us {
		ids[i] = u.id.tb()
	}
	t, since := c.lastTS, c.lastLocal
	if t == 0 { // no batch answered yet (a Check's read): the clock's estimate
		since, t = c.nows()
	}
	ctx, cancel := context.WithTimeout(ctx, c.conn.Timeout())
	found, err := c.conn.LookupAccounts(ctx, ids)
	cancel()
	now := c.localNow()
	accounts := matchAccounts(us, found)
	span := uint64(max(now-since, 0))
	for i, u := range us {
		u.lock()
		u.v.Queued = false
		// An account of a lazy resource never credited is being
		// provisioned (its account made, its credit on the way: see
		// sight): its limit is not 0, it is unknown.
		if err == nil && !fromTB(accounts[i].ID).IsZero() && !(u.res.Lazy && uncreditedAccount(accounts[i])) {
			if b, berr := balanceOf(accounts[i]); berr == nil {
				u.v.Provisioned = true
				u.v.Read(b.Limit, b.InFlight, t, span)
				u.v.ReadLocal = now
			}
		}
		u.mu.Unlock()
	}
	return err
}

// matchAccounts lines up the accounts a lookup found with the users asked
// for (TigerBeetle answers in the order asked, leaving out those not found).
func matchAccounts(us []*user, found []tb.Account) []tb.Account {
	out := make([]tb.Account, len(us))
	j := 0
	for i, u := range us {
		if j < len(found) && fromTB(found[j].ID) == u.id {
			out[i] = found[j]
			j++
		}
	}
	return out
}
