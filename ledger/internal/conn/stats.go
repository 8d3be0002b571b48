package conn

import (
	"sync/atomic"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// OpStats counts the calls made for one TigerBeetle operation and the
// events (accounts, transfers, IDs or filters) they carried. A real
// TigerBeetle client may pack several concurrent calls into one request,
// so Requests is an upper bound on what the cluster received.
type OpStats struct {
	Requests uint64
	Events   uint64
}

// Stats counts what a Conn sent, by operation, and how the cluster
// answered; and, counted by the ledger.Client above it, the decisions it
// took without sending anything. It is ledger.Stats (an alias), declared
// here once so that a Conn's counts are returned as they are, not copied
// field by field into another type.
type Stats struct {
	CreateAccounts      OpStats
	CreateTransfers     OpStats
	LookupAccounts      OpStats
	LookupTransfers     OpStats
	GetAccountTransfers OpStats
	QueryAccounts       OpStats
	QueryTransfers      OpStats
	// Unanswered counts the calls that reached their deadline without an
	// answer; NeverAnswered those of them made before the cluster had
	// ever answered this Conn (no connection: see ErrUnavailable).
	Unanswered, NeverAnswered uint64
	// Reconnects counts the new clients opened after the cluster evicted
	// the session of the one before (see ledger.Dial).
	Reconnects uint64
	// LocalDenials counts decisions denied on the view of a user known to
	// be drained, without any I/O. The ledger.Client counts them: 0 in
	// what Conn.Stats returns.
	LocalDenials uint64
	// LeaseAdmissions counts decisions admitted from a lease
	// (ledger.WithLeases), without any I/O. The ledger.Client counts them:
	// 0 in what Conn.Stats returns.
	LeaseAdmissions uint64
}

// Stats returns what c has sent so far.
func (c *Conn) Stats() Stats {
	s := &c.counted.stats
	load := func(o *opCounter) OpStats { return OpStats{o.requests.Load(), o.events.Load()} }
	return Stats{
		CreateAccounts:      load(&s.createAccounts),
		CreateTransfers:     load(&s.createTransfers),
		LookupAccounts:      load(&s.lookupAccounts),
		LookupTransfers:     load(&s.lookupTransfers),
		GetAccountTransfers: load(&s.getAccountTransfers),
		QueryAccounts:       load(&s.queryAccounts),
		QueryTransfers:      load(&s.queryTransfers),
		Unanswered:          c.unanswered.Load(),
		NeverAnswered:       c.neverAnswered.Load(),
		Reconnects:          c.reconnects.Load(),
	}
}

type opCounter struct{ requests, events atomic.Uint64 }

func (o *opCounter) add(events int) {
	o.requests.Add(1)
	o.events.Add(uint64(events))
}

// counting forwards to a tb.Client, the one in use (see Conn.reconnect),
// and counts what passes.
type counting struct {
	client atomic.Pointer[clientBox]
	stats  struct {
		createAccounts, createTransfers, lookupAccounts, lookupTransfers,
		getAccountTransfers, queryAccounts, queryTransfers opCounter
	}
}

func (c *counting) CreateAccounts(a []tb.Account) ([]tb.CreateAccountResult, error) {
	c.stats.createAccounts.add(len(a))
	return c.get().CreateAccounts(a)
}

// createAccountsDeferred is CreateAccounts without waiting for the
// engine to make the request durable, where it offers that (an embedded
// journal: see embedded.File.CreateAccountsDeferred); the create that
// follows makes it durable.
func (c *counting) createAccountsDeferred(a []tb.Account) ([]tb.CreateAccountResult, error) {
	c.stats.createAccounts.add(len(a))
	if d, ok := c.get().(interface {
		CreateAccountsDeferred([]tb.Account) ([]tb.CreateAccountResult, error)
	}); ok {
		return d.CreateAccountsDeferred(a)
	}
	return c.get().CreateAccounts(a)
}

func (c *counting) CreateTransfers(t []tb.Transfer) ([]tb.CreateTransferResult, error) {
	c.stats.createTransfers.add(len(t))
	return c.get().CreateTransfers(t)
}

func (c *counting) LookupAccounts(ids []tb.Uint128) ([]tb.Account, error) {
	c.stats.lookupAccounts.add(len(ids))
	return c.get().LookupAccounts(ids)
}

func (c *counting) LookupTransfers(ids []tb.Uint128) ([]tb.Transfer, error) {
	c.stats.lookupTransfers.add(len(ids))
	return c.get().LookupTransfers(ids)
}

func (c *counting) GetAccountTransfers(f tb.AccountFilter) ([]tb.Transfer, error) {
	c.stats.getAccountTransfers.add(1)
	return c.get().GetAccountTransfers(f)
}

func (c *counting) QueryTransfers(f tb.QueryFilter) ([]tb.Transfer, error) {
	c.stats.queryTransfers.add(1)
	return c.get().QueryTransfers(f)
}

func (c *counting) QueryAccounts(f tb.QueryFilter) ([]tb.Account, error) {
	c.stats.queryAccounts.add(1)
	return c.get().QueryAccounts(f)
}

// clientBox holds a tb.Client for an atomic.Pointer.
type clientBox struct{ tb.Client }

func (c *counting) get() tb.Client { return c.client.Load().Client }

func (c *counting) GetAccountBalances(f tb.AccountFilter) ([]tb.AccountBalance, error) {
	return c.get().GetAccountBalances(f)
}

func (c *counting) GetChangeEvents(f tb.ChangeEventsFilter) ([]tb.ChangeEvent, error) {
	return c.get().GetChangeEvents(f)
}

func (c *counting) Nop() error { return c.get().Nop() }

func (c *counting) Close() { c.get().Close() }
