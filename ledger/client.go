package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Client keeps limits in a TigerBeetle cluster, or in anything else that
// implements tigerbeetle-go's Client interface, such as the embedded engine
// in package ledger/embedded.
//
// A Client is safe for concurrent use and should be shared: the TigerBeetle
// client batches concurrent calls into one request. Every method takes a
// context; since the TigerBeetle client itself never times out, a Client
// enforces the context's deadline (or the default timeout of WithTimeout when
// the context has none) and returns ErrUnavailable when it passes. A call that
// timed out may still be applied by the cluster afterwards.
type Client struct {
	tb          tb.Client // counted, below
	counted     counting
	inProcess   bool
	now         func() time.Time
	timeout     time.Duration
	maxWaiting  int64
	waiting     atomic.Int64
	unavailable Policy
	closeTB     bool
	batch       batcher
	coalesce    *coalescer // nil unless WithCoalescing
	leases      *leaser    // nil unless WithLeases
	drain       drainCache
	// The most events one request carries, learnt per kind of operation:
	// creates, lookups, and query results (see batchCap).
	createCap, lookupCap, queryCap *batchCap
}

// Policy says what a decision returns when the cluster is unavailable.
type Policy uint8

const (
	// ReturnError returns the error (wrapping ErrUnavailable) and a
	// Decision that does not allow. It is the default.
	ReturnError Policy = iota
	// FailOpen allows the request and returns no error; the Decision is
	// marked Unavailable. Money is never paid open: Pay always returns the
	// error.
	FailOpen
	// FailClosed denies the request and returns no error; the Decision is
	// marked Unavailable.
	FailClosed
)

// String returns "error", "open" or "closed".
func (p Policy) String() string {
	switch p {
	case ReturnError:
		return "error"
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// Option configures a Client.
type Option func(*Client)

// WithTimeout sets how long a call may wait for the cluster when its context
// has no deadline (default 5s).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithUnavailable sets what decisions return when the cluster is unavailable.
func WithUnavailable(p Policy) Option { return func(c *Client) { c.unavailable = p } }

// WithMaxWaiting bounds how many calls may wait for an unresponsive cluster at
// once (default 65536). Beyond it calls fail at once with ErrUnavailable
// instead of piling up goroutines.
func WithMaxWaiting(n int) Option { return func(c *Client) { c.maxWaiting = int64(n) } }

// WithClock sets the clock used to tell how long ago a cluster timestamp was,
// for Inspect (default: the clock of an engine that has a Now method, such
// as the embedded engine, else time.Now).
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// New returns a Client that keeps limits through c. Close does not close c.
func New(c tb.Client, opts ...Option) *Client {
	cl := &Client{timeout: 5 * time.Second, maxWaiting: 1 << 16, now: time.Now}
	cl.counted.Client = c
	cl.tb = &cl.counted
	cl.createCap, cl.lookupCap, cl.queryCap = newBatchCap(), newBatchCap(), newBatchCap()
	if e, ok := c.(interface{ Now() time.Time }); ok {
		cl.now = e.Now
	}
	if e, ok := c.(interface{ InProcess() bool }); ok {
		cl.inProcess = e.InProcess()
	}
	for _, o := range opts {
		o(cl)
	}
	return cl
}

// Dial connects to a TigerBeetle cluster. It does not wait for the cluster:
// use Ping for that. Close closes the connection.
func Dial(clusterID uint64, addresses []string, opts ...Option) (*Client, error) {
	if len(addresses) == 0 {
		return nil, fmt.Errorf("ledger: dial: no addresses")
	}
	c, err := tb.NewClient(tb.ToUint128(clusterID), addresses)
	if err != nil {
		return nil, fmt.Errorf("ledger: dial %v: %w", addresses, err)
	}
	cl := New(c, opts...)
	cl.closeTB = true
	return cl, nil
}

// Close releases the connection if Dial made it. Calls still waiting for an
// unresponsive cluster return ErrUnavailable.
func (c *Client) Close() {
	if c.closeTB {
		c.counted.Client.Close()
	}
}

// Ping waits until the cluster answers, or ctx is done.
func (c *Client) Ping(ctx context.Context) error {
	_, err := call(ctx, c, func() (struct{}, error) { return struct{}{}, c.tb.Nop() })
	return err
}

// call runs f against the TigerBeetle client within ctx's deadline. A call
// that outlives its deadline keeps running in the background until the
// client answers or is closed; its result is dropped.
func call[T any](ctx context.Context, c *Client, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, unavailable(err)
	}
	if c.inProcess {
		v, err := f()
		return v, tbError(err)
	}
	if c.waiting.Add(1) > c.maxWaiting {
		c.waiting.Add(-1)
		return zero, fmt.Errorf("%w: %d calls already waiting for the cluster", ErrUnavailable, c.maxWaiting)
	}
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer c.waiting.Add(-1)
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, tbError(r.err)
	case <-ctx.Done():
		return zero, fmt.Errorf("%w: no answer: %w", ErrUnavailable, context.Cause(ctx))
	}
}

func unavailable(err error) error { return fmt.Errorf("%w: %w", ErrUnavailable, err) }

func tbError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tb.ErrTooMuchData):
		return fmt.Errorf("%w: %w", ErrTooMany, err)
	case errors.Is(err, tb.ErrClientClosed), errors.Is(err, tb.ErrClientEvicted),
		errors.Is(err, tb.ErrClientReleaseTooLow), errors.Is(err, tb.ErrClientReleaseTooHigh):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return fmt.Errorf("ledger: tigerbeetle: %w", err)
}

// createTransfers sends transfers and returns one status per transfer
// (TransferExists folded into TransferCreated). A batch larger than the
// cluster takes in one request (a --development server takes about 250
// transfers) is split, never inside a linked chain, and the size that worked
// is remembered.
func (c *Client) createTransfers(ctx context.Context, ts []tb.Transfer) ([]tb.CreateTransferResult, error) {
	res, err := split(ctx, c, ts, func(t tb.Transfer) bool { return t.TransferFlags().Linked },
		func(part []tb.Transfer) ([]tb.CreateTransferResult, error) { return c.tb.CreateTransfers(part) })
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

func (c *Client) createAccounts(ctx context.Context, as []tb.Account) ([]tb.CreateAccountResult, error) {
	res, err := split(ctx, c, as, func(a tb.Account) bool { return a.AccountFlags().Linked },
		func(part []tb.Account) ([]tb.CreateAccountResult, error) { return c.tb.CreateAccounts(part) })
	if err != nil {
		return nil, err
	}
	for i := range res {
		if res[i].Status == tb.AccountExists {
			res[i].Status = tb.AccountCreated
		}
	}
	return res, nil
}

// split sends events in requests the cluster accepts (c.createCap),
// sending a request it refuses as too large again in smaller parts (it is
// refused whole, so that is safe). linked tells which events continue a
// chain: a chain is never split, and a chain longer than a request is
// ErrTooMany.
func split[E, R any](ctx context.Context, c *Client, events []E, linked func(E) bool, send func([]E) ([]R, error)) ([]R, error) {
	out := make([]R, 0, len(events))
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
		res, err := call(ctx, c, func() ([]R, error) { return send(part) })
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
		out = append(out, res...)
		start = end
	}
	return out, nil
}

func (c *Client) lookupAccounts(ctx context.Context, ids ...ID) ([]tb.Account, error) {
	u := make([]tb.Uint128, len(ids))
	for i, id := range ids {
		u[i] = id.tb()
	}
	return lookup(ctx, c, u, c.tb.LookupAccounts)
}

// lookup sends a lookup in parts the cluster accepts (c.lookupCap), as
// split does for creates.
func lookup[R any](ctx context.Context, c *Client, ids []tb.Uint128, send func([]tb.Uint128) ([]R, error)) ([]R, error) {
	var out []R
	for start := 0; start < len(ids) || start == 0; {
		size := c.lookupCap.size()
		end := min(start+size, len(ids))
		part := ids[start:end]
		res, err := call(ctx, c, func() ([]R, error) { return send(part) })
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

// page returns the next page of f's query: at most want results, fewer if
// the cluster returns fewer per reply (it answers ErrTooMany to a limit it
// cannot return in one, and c.queryCap learns the largest it can).
func page[F, R any](ctx context.Context, c *Client, f *F, limit *uint32, want uint32, send func(F) ([]R, error)) ([]R, error) {
	for {
		*limit = uint32(min(int(want), c.queryCap.size()))
		res, err := call(ctx, c, func() ([]R, error) { return send(*f) })
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

// lookupAccount returns the account with id, or ok=false.
func (c *Client) lookupAccount(ctx context.Context, id ID) (tb.Account, bool, error) {
	as, err := c.lookupAccounts(ctx, id)
	if err != nil || len(as) == 0 {
		return tb.Account{}, false, err
	}
	return as[0], true, nil
}

// BatchMax is the most events one TigerBeetle request carries.
const BatchMax = 8189

func transferStatusError(i int, s tb.CreateTransferStatus) error {
	return &StatusError{Op: "create_transfers", Index: i, Status: s.String(), Code: uint32(s)}
}

func accountStatusError(i int, s tb.CreateAccountStatus) error {
	return &StatusError{Op: "create_accounts", Index: i, Status: s.String(), Code: uint32(s)}
}
