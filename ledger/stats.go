package ledger

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/tblimit/tblimit/ledger/internal/conn"
)

// OpStats counts the calls this Client made for one TigerBeetle operation
// and the events (accounts, transfers, IDs or filters) they carried: Requests
// and Events. A real TigerBeetle client may pack several concurrent calls
// into one request, so Requests is an upper bound on what the cluster
// received.
type OpStats = conn.OpStats

// Stats counts what a Client sent to TigerBeetle, the engine-independent
// cost of its decisions (for example, transfers per admitted decision), and
// the decisions it took without sending anything:
//   - CreateAccounts, CreateTransfers, LookupAccounts, LookupTransfers,
//     GetAccountTransfers, QueryAccounts, QueryTransfers: an OpStats per
//     operation sent;
//   - Unanswered: the calls that reached their deadline without the
//     cluster's answer (ErrUnavailable); NeverAnswered, those of them made
//     before the cluster had answered this Client at all: no connection (a
//     replica full of clients, a wrong address or cluster ID);
//   - Reconnects: the new TigerBeetle clients it opened because the cluster
//     evicted its session (see Dial);
//   - LocalDenials: decisions denied on the view of a user known to be
//     drained, and LeaseAdmissions: decisions admitted from a lease
//     (WithLeases), both without any I/O.
//
// It is the type in which the Client's connection counts (an alias), so
// that its counts are returned as they are rather than copied field by
// field; ledger/embedded and ledger/simnet have Stats of their own, which
// count what an engine served and stores, and what a modelled network
// carried.
type Stats = conn.Stats

// Stats returns what c has sent so far.
func (c *Client) Stats() Stats {
	s := c.conn.Stats()
	s.LocalDenials, s.LeaseAdmissions = c.localDenials.load(), c.leaseAdmissions.Load()
	return s
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
