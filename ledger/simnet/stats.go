package simnet

import "time"

// OpStats counts one operation's calls and the requests that carried them.
type OpStats struct {
	Calls    uint64 // calls accepted (not those refused at once: closed, too much data)
	Requests uint64 // requests sent, each carrying one or more calls
	Events   uint64 // events the requests carried: accounts, transfers, IDs or filters
}

// Stats describes what a Client sent through the modelled network: its
// calls, the requests that carried them, their time in flight and the
// faults injected, which ledger.Stats (what a ledger.Client asked) does
// not count.
type Stats struct {
	// Ops are indexed by operation: Ops[CreateTransfers].
	Ops [opCount]OpStats
	// Busy is the model time requests were in flight.
	Busy time.Duration
	// Overran counts the requests the wrapped client took longer to apply
	// than the model gave them (they took that long).
	Overran uint64
	// Faults injected: requests stalled, lost before being applied, lost
	// after (their reply), and applied twice.
	Stalled, DroppedRequests, DroppedReplies, Duplicated uint64
	// Evicted counts the requests answered tb.ErrClientEvicted (Faults.Evict).
	Evicted uint64
}

// Requests returns the requests sent, all operations together.
func (s Stats) Requests() uint64 {
	var n uint64
	for _, o := range s.Ops {
		n += o.Requests
	}
	return n
}

// Stats returns what c has sent so far.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}
