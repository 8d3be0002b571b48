package embedded

import (
	"errors"
	"sync"
	"sync/atomic"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

var (
	// ErrClockOutOfRange is returned by a request that would need a cluster
	// timestamp past TigerBeetle's largest, 2^63 - 1 ns after the Unix
	// epoch (in the year 2262): a clock set that far makes every later
	// request fail, as it would stop a cluster.
	ErrClockOutOfRange = errors.New("embedded: cluster time past the largest timestamp (2^63-1 ns)")
)

// Engine is an in-process TigerBeetle: it implements tb.Client with the
// state machine of a TigerBeetle 0.17.9 cluster, so that code written for a
// real cluster runs unchanged against it. Create one with New; the zero
// value is not usable.
//
// An Engine is safe for concurrent use by multiple goroutines; requests are
// applied one at a time, in the order they take the engine's lock, like a
// cluster commits requests one at a time.
type Engine struct {
	clock Clock
	sys   *systemClock // the default clock, read without an interface call

	mu     sync.Mutex
	closed bool
	last   uint64        // the latest cluster timestamp issued
	issued atomic.Uint64 // last, readable without the lock
	st     *state
	stats  Stats

	// Settings only Open reads.
	cacheSize     int64
	ckptBytes     int64
	progress      func(done, total int64)
	noCheckpoints bool // tests: the journal keeps every request
}

// Option configures an Engine.
type Option func(*Engine)

// WithClock sets the clock the engine reads cluster time from. The default
// is the system clock: the wall-clock time at New plus the monotonic time
// elapsed since, so that steps of the wall clock do not show. Use a
// ManualClock to make pending transfers expire on demand. A nil Clock
// leaves the default.
func WithClock(c Clock) Option {
	return func(e *Engine) {
		if c != nil {
			e.clock, e.sys = c, nil
		}
	}
}

// WithCacheSize sets how many bytes of stored accounts, transfers,
// expiries and Pebble blocks a File opened with Open keeps in memory
// besides what it must (the account IDs, the pending transfers' expiry,
// what changed since the last checkpoint), a quarter for the accounts,
// transfers and expiries it read back or wrote, the rest (8 MiB at least)
// Pebble's, which reserves its memtables in it (16 MiB each, two or three
// at once) and caches blocks in what is left; the default is 64 MiB.
// Pebble's share is allocated with C's malloc: on glibc, a program that
// imports ledger/embedded/onearena for its effect, as the tblimit command does,
// keeps it in one arena, where many keep freed blocks besides. New
// ignores it.
func WithCacheSize(bytes int64) Option {
	return func(e *Engine) { e.cacheSize = bytes }
}

// WithCheckpointBytes sets how much journal a File opened with Open
// writes between two checkpoints of its store: what a start after a crash
// replays at most, and the space a new journal is made with (at most
// 64 MiB). The default (n = 0) is 3 MiB; smaller costs more fsyncs,
// larger more memory (what changed since the last checkpoint stays in
// memory, and from about 4 MiB the batch that writes it stays on the
// heap until Pebble flushes it); below 1, every request is checkpointed,
// as with 1. New ignores it.
func WithCheckpointBytes(n int64) Option {
	return func(e *Engine) { e.ckptBytes = n }
}

// WithProgress has Open call f as it applies a journal's records to its
// store (the one-time conversion of a journal written before stores, or
// the requests since the last checkpoint after a crash): done of total
// bytes. New ignores it.
func WithProgress(f func(done, total int64)) Option {
	return func(e *Engine) { e.progress = f }
}

// New returns an empty engine: no accounts, no transfers.
func New(opts ...Option) *Engine {
	sys := newSystemClock()
	e := &Engine{clock: sys, sys: sys, st: newState()}
	for _, opt := range opts {
		opt(e)
	}
	return e
}

var _ tb.Client = (*Engine)(nil)

// OpStats counts the requests of one operation and the events (accounts,
// transfers, IDs or filters) they carried.
type OpStats struct {
	Requests uint64
	Events   uint64
}

// Stats describes an engine's work and contents. Requests refused with an
// error (closed engine, too much data) are not counted. It is not
// ledger.Stats: that counts what a Client sent, this what the engine
// served (every operation, from every client) and what it stores.
type Stats struct {
	CreateAccounts      OpStats
	CreateTransfers     OpStats
	LookupAccounts      OpStats
	LookupTransfers     OpStats
	GetAccountTransfers OpStats
	GetAccountBalances  OpStats
	QueryAccounts       OpStats
	QueryTransfers      OpStats
	GetChangeEvents     OpStats

	Accounts  uint64 // accounts stored
	Transfers uint64 // transfers stored (created ones; failed events are not stored)
	Pending   uint64 // stored pending transfers not yet posted, voided or expired
	Expired   uint64 // pending transfers released by their timeout
}

// Stats returns a snapshot of the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Accounts = uint64(int(e.st.accounts.n))
	s.Transfers = uint64(e.st.transfers.n)
	s.Pending = e.st.pendingCount
	s.Expired = e.st.expiredCount
	return s
}

// Every request takes e.mu for its whole length, in the exported method
// that serves it; the helpers below run under it.

// begin checks that a request of n events asking for up to size results
// (limit at most) may run, and returns its base timestamp: the clock time
// now, but never at or below a timestamp already issued, even if the clock
// goes backwards, as a cluster's primary does. begin requires that e.mu is
// held.
func (e *Engine) begin(now uint64, n int, size, limit uint64) (base uint64, err error) {
	if e.closed {
		return 0, tb.ErrClientClosed
	}
	if size > limit {
		return 0, tb.ErrTooMuchData
	}
	base = max(e.last+1, now)
	// Room for the request's timestamps and for those of the expiries it
	// may stamp first.
	if base > timestampMax-uint64(n)-e.st.pendingCount {
		return 0, ErrClockOutOfRange
	}
	return base, nil
}

// end records last as the latest timestamp a request took. end requires
// that e.mu is held.
func (e *Engine) end(last uint64) {
	e.last = last
	e.issued.Store(last)
}

// read prepares a read-only request of the given number of events, read at
// clock time now, that asks for up to size results (limit at most): it
// releases the pending transfers expired by the request's timestamp and
// counts the request in op. read requires that e.mu is held.
func (e *Engine) read(now, size, limit uint64, events int, op *OpStats) error {
	base, err := e.begin(now, 0, size, limit)
	if err != nil {
		return err
	}
	e.st.expire(base)
	e.end(max(base, e.st.lastEvent))
	op.Requests++
	op.Events += uint64(events)
	return nil
}

func (e *Engine) now() uint64 {
	if e.sys != nil {
		return e.sys.nanos()
	}
	return unixNanos(e.clock.Now())
}

// The create requests below are the only way state changes (besides
// expiry, which depends on time alone). Each is applied as a whole at its
// base timestamp, deterministically: recording (request, base) and
// replaying them in order rebuilds the state.

// CreateAccounts creates accounts, with one result per account in order.
func (e *Engine) CreateAccounts(accounts []tb.Account) ([]tb.CreateAccountResult, error) {
	var results []tb.CreateAccountResult
	if len(accounts) <= batchMax {
		results = make([]tb.CreateAccountResult, len(accounts))
	}
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	base, err := e.begin(now, len(accounts), uint64(len(accounts)), batchMax)
	if err != nil {
		return nil, err
	}
	e.end(e.st.createAccounts(base, accounts, results))
	e.stats.CreateAccounts.Requests++
	e.stats.CreateAccounts.Events += uint64(len(accounts))
	return results, nil
}

// CreateTransfers creates transfers, with one result per transfer in order.
func (e *Engine) CreateTransfers(transfers []tb.Transfer) ([]tb.CreateTransferResult, error) {
	var results []tb.CreateTransferResult
	if len(transfers) <= batchMax {
		results = make([]tb.CreateTransferResult, len(transfers))
	}
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	base, err := e.begin(now, len(transfers), uint64(len(transfers)), batchMax)
	if err != nil {
		return nil, err
	}
	e.end(e.st.createTransfers(base, transfers, results))
	e.stats.CreateTransfers.Requests++
	e.stats.CreateTransfers.Events += uint64(len(transfers))
	return results, nil
}

// LookupAccounts returns the accounts with the given IDs, in the order
// asked, leaving out those that do not exist.
func (e *Engine) LookupAccounts(accountIDs []tb.Uint128) ([]tb.Account, error) {
	var out []tb.Account
	if len(accountIDs) <= batchMax {
		out = make([]tb.Account, 0, len(accountIDs))
	}
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.read(now, uint64(len(accountIDs)), batchMax, len(accountIDs), &e.stats.LookupAccounts); err != nil {
		return nil, err
	}
	return e.st.lookupAccounts(accountIDs, out), nil
}

// LookupTransfers returns the transfers with the given IDs, in the order
// asked, leaving out those that do not exist.
func (e *Engine) LookupTransfers(transferIDs []tb.Uint128) ([]tb.Transfer, error) {
	var out []tb.Transfer
	if len(transferIDs) <= batchMax {
		out = make([]tb.Transfer, 0, len(transferIDs))
	}
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.read(now, uint64(len(transferIDs)), batchMax, len(transferIDs), &e.stats.LookupTransfers); err != nil {
		return nil, err
	}
	return e.st.lookupTransfers(transferIDs, out), nil
}

// GetAccountTransfers returns the transfers of filter.AccountID that match
// the filter, or none if the filter is invalid. A limit over 8189 is
// tb.ErrTooMuchData.
func (e *Engine) GetAccountTransfers(filter tb.AccountFilter) ([]tb.Transfer, error) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.read(now, uint64(filter.Limit), batchMax, 1, &e.stats.GetAccountTransfers); err != nil {
		return nil, err
	}
	return e.st.getAccountTransfers(&filter), nil
}

// GetAccountBalances returns the balances of filter.AccountID after each of
// its transfers that match the filter. Only accounts with flags.history keep
// them; for others, or an invalid filter, it returns none.
func (e *Engine) GetAccountBalances(filter tb.AccountFilter) ([]tb.AccountBalance, error) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.read(now, uint64(filter.Limit), batchMax, 1, &e.stats.GetAccountBalances); err != nil {
		return nil, err
	}
	return e.st.getAccountBalances(&filter), nil
}

// QueryAccounts returns the accounts that match the filter.
func (e *Engine) QueryAccounts(filter tb.QueryFilter) ([]tb.Account, error) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.read(now, uint64(filter.Limit), batchMax, 1, &e.stats.QueryAccounts); err != nil {
		return nil, err
	}
	return e.st.queryAccounts(&filter), nil
}

// QueryTransfers returns the transfers that match the filter.
func (e *Engine) QueryTransfers(filter tb.QueryFilter) ([]tb.Transfer, error) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.read(now, uint64(filter.Limit), batchMax, 1, &e.stats.QueryTransfers); err != nil {
		return nil, err
	}
	return e.st.queryTransfers(&filter), nil
}

// GetChangeEvents returns the change events that match the filter, in
// timestamp order: one for every transfer created (single phase, pending,
// post, void) and one for every pending transfer that expired, with both
// accounts' balances and flags right after the event. An invalid filter
// gives none; a limit over 2730 (what fits a reply) is tb.ErrTooMuchData.
// TigerBeetle documents it as experimental.
func (e *Engine) GetChangeEvents(filter tb.ChangeEventsFilter) ([]tb.ChangeEvent, error) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.read(now, uint64(filter.Limit), changeEventsMax, 1, &e.stats.GetChangeEvents); err != nil {
		return nil, err
	}
	return e.st.changeEvents(&filter), nil
}

// Nop does nothing; it fails only once the engine is closed.
func (e *Engine) Nop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return tb.ErrClientClosed
	}
	return nil
}

// Close closes the engine: every later call returns tb.ErrClientClosed.
// Calling it again does nothing.
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
}
