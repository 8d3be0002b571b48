// Package conn is ledger's plumbing to a TigerBeetle client: deadlines, learnt request sizes, paging, counting and batching.
//
// The TigerBeetle client has no context and never times out, and a cluster
// may take smaller requests than the protocol allows (a --development
// server). A Conn puts a deadline on every call, splits what is too large
// for one request (never inside a linked chain) and learns the largest
// request of each kind of operation the cluster takes, returns a query's
// results one page at a time (its callers page), and counts what it sends.
// It knows nothing of limits: package ledger decides what to send and what
// the answers mean.
package conn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// BatchMax is the most events one TigerBeetle request carries.
const BatchMax = 8189

var (
	// ErrUnavailable means the cluster did not answer within the call's
	// deadline, or the client was closed.
	ErrUnavailable = errors.New("ledger: cluster unavailable")
	// ErrTooMany means a batch holds more events than one request can carry.
	ErrTooMany = errors.New("ledger: too many events in one batch")
)

// Conn sends requests through a tb.Client. It is safe for concurrent use.
type Conn struct {
	tb         tb.Client // counted, below
	counted    counting
	inProcess  bool
	timeout    time.Duration
	maxWaiting int64
	waiting    atomic.Int64
	// The most events one request carries, learnt per kind of operation:
	// creates, lookups, and query results (see batchCap).
	createCap, lookupCap, queryCap *batchCap

	// answered: the cluster has answered a call of this Conn.
	answered                              atomic.Bool
	unanswered, neverAnswered, reconnects atomic.Uint64
	// redial opens a new client when the cluster evicted the session of
	// the one in use (nil: an evicted client stays evicted).
	redial   func() (tb.Client, error)
	redialMu sync.Mutex // held while a new client is opened
	closed   atomic.Bool
	observe  func(context.Context, Request) // nil: none (see SetObserver)
}

// New returns a Conn on c. A client that reports InProcess (the embedded
// engine) is called directly: its calls never block for long.
func New(c tb.Client) *Conn {
	cn := &Conn{timeout: 5 * time.Second, maxWaiting: 1 << 16}
	cn.counted.client.Store(&clientBox{c})
	cn.tb = &cn.counted
	cn.createCap, cn.lookupCap, cn.queryCap = newBatchCap(), newBatchCap(), newBatchCap()
	if e, ok := c.(interface{ InProcess() bool }); ok {
		cn.inProcess = e.InProcess()
	}
	return cn
}

// SetTimeout sets how long a call may wait when its context has no deadline.
func (c *Conn) SetTimeout(d time.Duration) { c.timeout = d }

// Timeout is how long a call may wait when its context has no deadline.
func (c *Conn) Timeout() time.Duration { return c.timeout }

// SetMaxWaiting bounds the calls waiting for an unresponsive cluster at once.
func (c *Conn) SetMaxWaiting(n int) { c.maxWaiting = int64(n) }

// InProcess reports whether the client is an in-process engine.
func (c *Conn) InProcess() bool { return c.inProcess }

// SetRedial makes an evicted session open a new client with dial.
func (c *Conn) SetRedial(dial func() (tb.Client, error)) { c.redial = dial }

// Close closes the TigerBeetle client.
func (c *Conn) Close() {
	c.closed.Store(true)
	c.redialMu.Lock() // no new client is being opened: close the last one
	defer c.redialMu.Unlock()
	c.counted.Close()
}

// reconnect replaces the client evicted, unless another caller already
// did, and reports whether a client that can be tried is in use. It waits
// backoff first, so that a cluster that keeps evicting is not flooded.
func (c *Conn) reconnect(evicted tb.Client, backoff time.Duration) bool {
	if c.redial == nil {
		return false
	}
	c.redialMu.Lock()
	defer c.redialMu.Unlock()
	if c.closed.Load() {
		return false
	}
	if c.counted.get() != evicted {
		return true // replaced meanwhile
	}
	time.Sleep(backoff)
	n, err := c.redial()
	if err != nil {
		return false
	}
	c.counted.client.Store(&clientBox{n})
	c.reconnects.Add(1)
	evicted.Close()
	return true
}

// NoAnswerYet is what a call that timed out before the cluster ever
// answered this Conn says, besides ErrUnavailable: the likeliest reason.
const NoAnswerYet = "no answer since this Client started: is the cluster running at these addresses, with this cluster ID? " +
	"A replica accepts 32 client connections (8 with --development; more with --limit-pipeline-requests) " +
	"and a cluster 64 sessions: a fleet beyond that shares them through tblimit serve"

// Ping waits until the cluster answers, or ctx is done.
func (c *Conn) Ping(ctx context.Context) error {
	_, err := call(ctx, c, func() (struct{}, error) { return struct{}{}, c.tb.Nop() })
	return err
}

// Wait is how long a call with ctx may wait for the cluster beyond ctx's
// own deadline: the Conn's default timeout when ctx has none (and is not
// Patient), else 0 (no bound but ctx's). call enforces it with a context;
// Batcher.Do, on a hot path, with a reused timer.
func (c *Conn) Wait(ctx context.Context) time.Duration {
	if _, ok := ctx.Deadline(); ok || c.timeout <= 0 || ctx.Value(patient{}) != nil {
		return 0
	}
	return c.timeout
}

type patient struct{}

// Patient returns ctx marked to wait for the cluster without the default
// timeout: until ctx ends, or the cluster answers, or the client is closed.
func Patient(ctx context.Context) context.Context { return context.WithValue(ctx, patient{}, true) }

// call runs f against the TigerBeetle client within ctx's deadline (or the
// default timeout). A call that outlives its deadline keeps running in the
// background until the client answers or is closed; its result is dropped.
func call[T any](ctx context.Context, c *Conn, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, Unavailable(err)
	}
	if c.inProcess {
		v, err := f()
		return v, tbError(err)
	}
	if c.waiting.Add(1) > c.maxWaiting {
		c.waiting.Add(-1)
		return zero, fmt.Errorf("%w: %d calls already waiting for the cluster", ErrUnavailable, c.maxWaiting)
	}
	wait := c.Wait(ctx)
	if ctx.Done() == nil && wait == 0 {
		// Nothing can end the wait but the answer (a Patient call, as the
		// pipeline's requests are): no goroutine to hand the call to, one
		// switch fewer between the answer and the next request.
		defer c.waiting.Add(-1)
		v, err := retryEvicted(c, f)
		return v, tbError(err)
	}
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer c.waiting.Add(-1)
		v, err := retryEvicted(c, f)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, tbError(r.err)
	case <-ctx.Done():
		return zero, c.NoAnswer(fmt.Errorf("%w: no answer: %w", ErrUnavailable, context.Cause(ctx)))
	}
}

// NoAnswer counts err, a call that ended without the cluster's answer
// (ErrUnavailable), and says so when the cluster never answered this Conn:
// no connection, the likeliest reason given. Other errors pass unchanged.
func (c *Conn) NoAnswer(err error) error {
	if !errors.Is(err, ErrUnavailable) || c.inProcess {
		return err
	}
	c.unanswered.Add(1)
	if c.answered.Load() {
		return err
	}
	c.neverAnswered.Add(1)
	return fmt.Errorf("%w (%s)", err, NoAnswerYet)
}

// retryEvicted runs f and, while the cluster answers that the session was
// evicted, runs it again on a new client (see reconnect). A request is
// sent again as it was, its events with their IDs: applied at most once
// whatever became of the one the eviction cut off.
func retryEvicted[T any](c *Conn, f func() (T, error)) (T, error) {
	backoff := time.Duration(0)
	for {
		client := c.counted.get()
		v, err := f()
		switch {
		case err == nil || !errors.Is(err, tb.ErrClientEvicted) && !errors.Is(err, tb.ErrClientClosed):
			c.answered.Store(true)
			return v, err
		case !errors.Is(err, tb.ErrClientEvicted) || !c.reconnect(client, backoff):
			return v, err
		}
		backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
	}
}

// Unavailable wraps err (a context's error, usually) as ErrUnavailable.
func Unavailable(err error) error { return fmt.Errorf("%w: %w", ErrUnavailable, err) }

// unapplied is an error of a request that says it was not applied and may
// be sent again, as one the cluster never answered (the embedded engine's
// refusals: embedded.ErrRefused).
type unapplied interface{ Unavailable() bool }

// isUnapplied reports whether err says it was not applied (unapplied). Apart
// from tbError, so that a call answered without an error allocates nothing.
func isUnapplied(err error) bool {
	var u unapplied
	return errors.As(err, &u) && u.Unavailable()
}

func tbError(err error) error {
	var r relayed
	switch {
	case err == nil:
		return nil
	case errors.As(err, &r):
		return r.err
	case isUnapplied(err):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case errors.Is(err, tb.ErrTooMuchData):
		return fmt.Errorf("%w: %w", ErrTooMany, err)
	case errors.Is(err, tb.ErrClientClosed), errors.Is(err, tb.ErrClientEvicted),
		errors.Is(err, tb.ErrClientReleaseTooLow), errors.Is(err, tb.ErrClientReleaseTooHigh):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return fmt.Errorf("ledger: tigerbeetle: %w", err)
}

// CreateTransfers sends transfers and returns one result per transfer, with
// TransferExists folded into TransferCreated (a retry of an applied
// transfer). A batch larger than the cluster takes in one request is split,
// never inside a linked chain.
func (c *Conn) CreateTransfers(ctx context.Context, ts []tb.Transfer) ([]tb.CreateTransferResult, error) {
	res, err := split(ctx, c, "create_transfers", ts, func(t tb.Transfer) bool { return t.TransferFlags().Linked }, c.tb.CreateTransfers)
	if err != nil {
		return nil, err
	}
	for i := range res {
		if res[i].Status == tb.TransferExists {
			res[i].Status = tb.TransferCreated
		}
	}
	return res, nil
}

// CreateAccounts sends accounts as CreateTransfers sends transfers. It does
// not fold AccountExists: callers tell a new account from an old one.
func (c *Conn) CreateAccounts(ctx context.Context, as []tb.Account) ([]tb.CreateAccountResult, error) {
	return split(ctx, c, "create_accounts", as, func(a tb.Account) bool { return a.AccountFlags().Linked }, c.tb.CreateAccounts)
}

// CreateAccountsAhead is CreateAccounts for accounts that a create of
// transfers follows at once, from the same goroutine: an engine that makes
// requests durable one by one (an embedded journal) may leave these to the
// fsync of the create that follows.
func (c *Conn) CreateAccountsAhead(ctx context.Context, as []tb.Account) ([]tb.CreateAccountResult, error) {
	return split(ctx, c, "create_accounts", as, func(a tb.Account) bool { return a.AccountFlags().Linked }, c.counted.createAccountsDeferred)
}

// split sends events in requests the cluster accepts (c.createCap),
// sending a request it refuses as too large again in smaller parts (it is
// refused whole, so that is safe). linked tells which events continue a
// chain: a chain is never split, and a chain longer than a request is
// ErrTooMany.
func split[E, R any](ctx context.Context, c *Conn, op string, events []E, linked func(E) bool, send func([]E) ([]R, error)) ([]R, error) {
	var out []R
	for start := 0; start < len(events); {
		size := c.createCap.size()
		end := min(start+size, len(events))
		for end < len(events) && end > start && linked(events[end-1]) {
			end--
		}
		if end == start {
			return nil, fmt.Errorf("%w: a linked chain longer than %d events", ErrTooMany, size)
		}
		part := events[start:end]
		res, err := call(ctx, c, observed(ctx, c, op, len(part), func() ([]R, error) { return send(part) }))
		if errors.Is(err, ErrTooMany) && len(part) > 1 {
			c.createCap.refused(len(part))
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(res) != len(part) {
			return nil, fmt.Errorf("ledger: %d results for %d events", len(res), len(part))
		}
		c.createCap.accepted(len(part))
		if start == 0 && end == len(events) {
			return res, nil // one request: no copy
		}
		out = append(out, res...)
		start = end
	}
	return out, nil
}

// LookupAccounts returns the accounts with ids that exist, in the order
// asked (TigerBeetle leaves out those not found).
func (c *Conn) LookupAccounts(ctx context.Context, ids []tb.Uint128) ([]tb.Account, error) {
	return lookup(ctx, c, "lookup_accounts", ids, c.tb.LookupAccounts)
}

// LookupTransfers returns the transfers with ids that exist, in the order asked.
func (c *Conn) LookupTransfers(ctx context.Context, ids []tb.Uint128) ([]tb.Transfer, error) {
	return lookup(ctx, c, "lookup_transfers", ids, c.tb.LookupTransfers)
}

// lookup sends a lookup in parts the cluster accepts (c.lookupCap), as
// split does for creates.
func lookup[R any](ctx context.Context, c *Conn, op string, ids []tb.Uint128, send func([]tb.Uint128) ([]R, error)) ([]R, error) {
	var out []R
	for start := 0; start < len(ids) || start == 0; {
		size := c.lookupCap.size()
		end := min(start+size, len(ids))
		part := ids[start:end]
		res, err := call(ctx, c, observed(ctx, c, op, len(part), func() ([]R, error) { return send(part) }))
		if errors.Is(err, ErrTooMany) && len(part) > 1 {
			c.lookupCap.refused(len(part))
			continue
		}
		if err != nil {
			return nil, err
		}
		c.lookupCap.accepted(len(part))
		if start == 0 && end == len(ids) {
			return res, nil
		}
		out = append(out, res...)
		if end == len(ids) {
			break
		}
		start = end
	}
	return out, nil
}

// AccountTransfers returns the next page of f: at most want transfers, and
// fewer only when there are no more (a reply holds up to BatchMax). It sets
// f.Limit to what it asked, which may be less than want (see page).
func (c *Conn) AccountTransfers(ctx context.Context, f *tb.AccountFilter, want uint32) ([]tb.Transfer, error) {
	return page(ctx, c, "get_account_transfers", f, &f.Limit, want, c.tb.GetAccountTransfers)
}

// QueryTransfers returns the next page of f, as AccountTransfers does.
func (c *Conn) QueryTransfers(ctx context.Context, f *tb.QueryFilter, want uint32) ([]tb.Transfer, error) {
	return page(ctx, c, "query_transfers", f, &f.Limit, want, c.tb.QueryTransfers)
}

// QueryAccounts returns the next page of f, as AccountTransfers does.
func (c *Conn) QueryAccounts(ctx context.Context, f *tb.QueryFilter, want uint32) ([]tb.Account, error) {
	return page(ctx, c, "query_accounts", f, &f.Limit, want, c.tb.QueryAccounts)
}

// page returns the next page of f's query: at most want results. A limit
// the client library refuses (ErrTooMany) is asked again smaller, as
// c.queryCap learns the largest it takes.
func page[F, R any](ctx context.Context, c *Conn, op string, f *F, limit *uint32, want uint32, send func(F) ([]R, error)) ([]R, error) {
	for {
		*limit = uint32(min(int(want), c.queryCap.size()))
		res, err := call(ctx, c, observed(ctx, c, op, 1, func() ([]R, error) { return send(*f) }))
		if errors.Is(err, ErrTooMany) && *limit > 1 {
			c.queryCap.refused(int(*limit))
			continue
		}
		if err == nil {
			c.queryCap.accepted(int(*limit))
		}
		return res, err
	}
}

// CreateCap is the most events a create request carries now: what a
// batch of decisions should stay within.
func (c *Conn) CreateCap() int { return c.createCap.size() }
