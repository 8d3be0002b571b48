package ledger

import (
	"math/rand/v2"
	"sync/atomic"
)

// OpStats counts the calls this Client made for one TigerBeetle operation
// and the events (accounts, transfers, IDs or filters) they carried. A real
// TigerBeetle client may pack several concurrent calls into one request, so
// Requests is an upper bound on what the cluster received.
type OpStats struct {
	Requests uint64
	Events   uint64
}

// Stats counts what a Client sent to TigerBeetle, the engine-independent
// cost of its decisions (for example, transfers per admitted decision), and
// the decisions it took without sending anything.
type Stats struct {
	CreateAccounts      OpStats
	CreateTransfers     OpStats
	LookupAccounts      OpStats
	LookupTransfers     OpStats
	GetAccountTransfers OpStats
	QueryAccounts       OpStats
	QueryTransfers      OpStats
	// Unanswered counts the calls that reached their deadline without the
	// cluster's answer (ErrUnavailable); NeverAnswered, those of them made
	// before the cluster had answered this Client at all: no connection (a
	// replica full of clients, a wrong address or cluster ID).
	Unanswered, NeverAnswered uint64
	// Reconnects counts the new TigerBeetle clients a Client opened because
	// the cluster evicted its session (see Dial).
	Reconnects uint64
	// LocalDenials counts decisions denied on the view of a user known to
	// be drained, without any I/O.
	LocalDenials uint64
	// LeaseAdmissions counts decisions admitted from a lease (WithLeases),
	// without any I/O.
	LeaseAdmissions uint64
}

// Stats returns what c has sent so far.
func (c *Client) Stats() Stats {
	s := c.conn.Stats()
	return Stats{
		CreateAccounts:      OpStats(s.CreateAccounts),
		CreateTransfers:     OpStats(s.CreateTransfers),
		LookupAccounts:      OpStats(s.LookupAccounts),
		LookupTransfers:     OpStats(s.LookupTransfers),
		GetAccountTransfers: OpStats(s.GetAccountTransfers),
		QueryAccounts:       OpStats(s.QueryAccounts),
		QueryTransfers:      OpStats(s.QueryTransfers),
		Unanswered:          s.Unanswered,
		NeverAnswered:       s.NeverAnswered,
		Reconnects:          s.Reconnects,
		LocalDenials:        c.localDenials.load(),
		LeaseAdmissions:     c.leaseAdmissions.Load(),
	}
}

// counter is a count that many goroutines add to at once, as every local
// denial of a hot user does: in stripes on cache lines of their own, summed
// when read, so that adding does not contend.
type counter struct {
	_       [56]byte // nor with what precedes it
	stripes [8]struct {
		n atomic.Uint64
		_ [56]byte
	}
}

func (c *counter) add(n uint64) { c.stripes[rand.Uint32()%uint32(len(c.stripes))].n.Add(n) }

// take returns the count and sets it to zero; an add that races with it
// is counted by the next take.
func (c *counter) take() uint64 {
	var sum uint64
	for i := range c.stripes {
		sum += c.stripes[i].n.Swap(0)
	}
	return sum
}

func (c *counter) load() uint64 {
	var sum uint64
	for i := range c.stripes {
		sum += c.stripes[i].n.Load()
	}
	return sum
}
