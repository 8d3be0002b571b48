package conn

import (
	"sync/atomic"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// OpStats counts the calls made for one TigerBeetle operation and the
// events (accounts, transfers, IDs or filters) they carried.
type OpStats struct {
	Requests uint64
	Events   uint64
}

// Stats counts what a Conn sent, by operation.
type Stats struct {
	CreateAccounts      OpStats
	CreateTransfers     OpStats
	LookupAccounts      OpStats
	LookupTransfers     OpStats
	GetAccountTransfers OpStats
	QueryAccounts       OpStats
	QueryTransfers      OpStats
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
	}
}

type opCounter struct{ requests, events atomic.Uint64 }

func (o *opCounter) add(events int) {
	o.requests.Add(1)
	o.events.Add(uint64(events))
}

// counting forwards to a tb.Client and counts what passes.
type counting struct {
	tb.Client
	stats struct {
		createAccounts, createTransfers, lookupAccounts, lookupTransfers,
		getAccountTransfers, queryAccounts, queryTransfers opCounter
	}
}

func (c *counting) CreateAccounts(a []tb.Account) ([]tb.CreateAccountResult, error) {
	c.stats.createAccounts.add(len(a))
	return c.Client.CreateAccounts(a)
}

func (c *counting) CreateTransfers(t []tb.Transfer) ([]tb.CreateTransferResult, error) {
	c.stats.createTransfers.add(len(t))
	return c.Client.CreateTransfers(t)
}

func (c *counting) LookupAccounts(ids []tb.Uint128) ([]tb.Account, error) {
	c.stats.lookupAccounts.add(len(ids))
	return c.Client.LookupAccounts(ids)
}

func (c *counting) LookupTransfers(ids []tb.Uint128) ([]tb.Transfer, error) {
	c.stats.lookupTransfers.add(len(ids))
	return c.Client.LookupTransfers(ids)
}

func (c *counting) GetAccountTransfers(f tb.AccountFilter) ([]tb.Transfer, error) {
	c.stats.getAccountTransfers.add(1)
	return c.Client.GetAccountTransfers(f)
}

func (c *counting) QueryTransfers(f tb.QueryFilter) ([]tb.Transfer, error) {
	c.stats.queryTransfers.add(1)
	return c.Client.QueryTransfers(f)
}

func (c *counting) QueryAccounts(f tb.QueryFilter) ([]tb.Account, error) {
	c.stats.queryAccounts.add(1)
	return c.Client.QueryAccounts(f)
}
