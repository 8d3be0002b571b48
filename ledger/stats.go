package ledger

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
		LocalDenials:        c.localDenials.Load(),
		LeaseAdmissions:     c.leaseAdmissions.Load(),
	}
}
