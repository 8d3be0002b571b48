package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/internal/conn"
	"github.com/tblimit/tblimit/ledger/internal/pipeline"
	"github.com/tblimit/tblimit/ledger/internal/view"
)

// Client keeps limits in a TigerBeetle cluster, or in anything else that
// implements tigerbeetle-go's Client interface, such as the embedded engine
// in package ledger/embedded.
//
// A Client is safe for concurrent use and should be shared: it sends the
// decisions of concurrent calls together, one request for all of them.
// Every method takes a context; since the TigerBeetle client itself never
// times out, a Client enforces the context's deadline (or the default
// timeout of WithTimeout when the context has none) and returns
// ErrUnavailable when it passes. A call that timed out may still be applied
// by the cluster afterwards.
//
// A Client keeps a view of each user it decides for (see Decision for what
// that makes exact), which costs about 256 bytes per user (a user's struct;
// more while it is planned or leased) and 40 per hold in flight that it
// took, for at most about half a million users.
type Client struct {
	conn        *conn.Conn
	now         func() time.Time
	unavailable OnUnavailable
	closeTB     bool
	maxWaiting  int
	exact       bool            // WithExactDecisions
	coalesce    bool            // WithCoalescing
	gather      time.Duration   // WithCoalescing's wait
	leases      *leaser         // nil unless WithLeases
	observer    Observer        // nil unless WithObserver
	requests    RequestObserver // nil unless WithRequestObserver
	users       users
	skew        atomic.Int64 // cluster time minus this Client's clock, from the last batch
	pipe        pipeline.Pipeline[*user, Decision]
	lastTS      uint64    // the latest timestamp of the last batch answered (see host.Clock)
	lastLocal   int64     // this Client's clock when its answer came
	reads       readQueue // the pipeline's too: filled as batches complete, read once every batch has (see package internal/pipeline)

	markers   sync.Map // ledgers whose marker accounts are known to exist
	resources sync.Map // ledger -> Resource: definitions checked against the cluster

	localDenials    counter
	leaseAdmissions atomic.Uint64
}

// OnUnavailable says what a decision returns when the cluster is
// unavailable (WithUnavailable). It is not a limit: those are
// recipes.Policy.
type OnUnavailable uint8

const (
	// ReturnError returns the error (wrapping ErrUnavailable) and a
	// Decision that does not allow. It is the default.
	ReturnError OnUnavailable = iota
	// FailOpen allows the request and returns no error; the Decision is
	// marked Unavailable. Money is never paid open: Pay always returns the
	// error.
	FailOpen
	// FailClosed denies the request and returns no error; the Decision is
	// marked Unavailable.
	FailClosed
)

// String returns "error", "open" or "closed".
func (p OnUnavailable) String() string {
	switch p {
	case ReturnError:
		return "error"
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return fmt.Sprintf("OnUnavailable(%d)", uint8(p))
}

// Option configures a Client.
type Option func(*Client)

// WithTimeout sets how long a call may wait for the cluster when its context
// has no deadline (default 5s).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.conn.SetTimeout(d) } }

// WithUnavailable sets what decisions return when the cluster is
// unavailable: ReturnError, FailOpen or FailClosed, one of them. Any other
// value (FailOpen|FailClosed is not one) panics, as a programming
// error, when the Client is built.
func WithUnavailable(p OnUnavailable) Option {
	return func(c *Client) {
		switch p {
		case ReturnError, FailOpen, FailClosed:
			c.unavailable = p
		default:
			panic(fmt.Sprintf("ledger: WithUnavailable(%v): want ReturnError, FailOpen or FailClosed", p))
		}
	}
}

// WithMaxWaiting bounds how many calls may wait for an unresponsive cluster at
// once (default 65536). Beyond it calls fail at once with ErrUnavailable
// instead of piling up goroutines.
func WithMaxWaiting(n int) Option {
	return func(c *Client) { c.maxWaiting = n; c.conn.SetMaxWaiting(n) }
}

// DefaultUserCache is how many users a Client keeps a view of unless
// WithUserCache says otherwise.
const DefaultUserCache = 1 << 17

// WithUserCache bounds how many users the Client keeps a view of (what it
// knows of their limits and units in flight, and that a lazy user was
// provisioned) at about users, DefaultUserCache by default: the table has
// 64 shards, each emptied when it holds users/64 (at least one). users < 1
// panics, as a programming error, when the Client is built. A view costs about
// 0.4 KB. A user dropped from it, when it is full, is not forgotten by the
// cluster: its next decisions go to the cluster as a user never seen does
// (a lazy user's carry its provisioning again, in the request the batch
// sends for new users), until it is known again. Raise it when more users
// than that decide within a window and memory allows; lower it to bound
// the memory of a process that meets many keys.
func WithUserCache(users int) Option {
	return func(c *Client) {
		if users < 1 {
			panic(fmt.Sprintf("ledger: WithUserCache(%d): want at least 1", users))
		}
		c.users.max = max(users/userShards, 1)
	}
}

// WithNow sets the Client's clock, from which it tells how long ago a
// cluster timestamp was: every decision's RetryAfter and ResetAfter, local
// denials, Inspect and Migrate use it (default: the clock of an engine that
// has a Now method, such as the embedded engine's manual clock, else
// time.Now). Tests on a manual clock give it that clock's Now:
// WithNow(clock.Now), beside embedded.WithClock(clock).
func WithNow(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithExactDecisions makes every decision read its users' accounts after
// its create, in the same batch (one more request per batch and one more
// event per decision), and, for a denial whose units in flight the Client
// did not take itself, their transfers: Limit, Remaining, RetryAfter and
// ResetAfter are then exact at the decision's instant even when other
// processes use the same users. It suits tools that make one decision and
// report it (the tblimit CLI does); a service should not need it.
func WithExactDecisions() Option { return func(c *Client) { c.exact = true } }

// New returns a Client that keeps limits through c. Close does not close c.
//
// WithCoalescing and WithLeases may be given together: a call is served
// from its user's lease when it can be, and renews the lease otherwise,
// with a transfer of its own (renewals are never merged). Coalescing then
// merges only the calls leases leave to it: AcquireAll of one part, without
// a Request.ID or Ref.
func New(c tb.Client, opts ...Option) *Client {
	cl := &Client{conn: conn.New(c), now: time.Now, maxWaiting: 1 << 16}
	WithUserCache(DefaultUserCache)(cl)
	cl.reads.budget, cl.reads.scanBudget = 1, 1 // the first read and scan need not wait
	if e, ok := c.(interface{ Now() time.Time }); ok {
		cl.now = e.Now
	}
	for _, o := range opts {
		o(cl)
	}
	if !cl.conn.InProcess() {
		cl.users.lag = view.ReturnLag
	}
	cl.pipe.Start(host{cl}, cl.conn, pipeline.Config{Coalesce: cl.coalesce, Gather: cl.gather, MaxWaiting: cl.maxWaiting, Observed: cl.requests != nil})
	return cl
}

// Dial connects to a TigerBeetle cluster. It does not wait for the cluster:
// use Ping for that. Close closes the connection.
//
// A Client holds one connection to a replica and one client session of
// the cluster while it is open, and so does each process, and each CLI
// command while it runs. A replica accepts 32 client connections with its
// default flags (8 with --development; --limit-pipeline-requests raises it,
// up to 65 with --experimental), and a cluster keeps 64 sessions, evicting
// the least recently used. A Client past a replica's limit is not refused:
// the TigerBeetle client reconnects for ever, so its calls fail with
// ErrUnavailable saying that the cluster never answered it (counted in
// Stats.NeverAnswered), and it answers once a connection frees. A Client
// whose session is evicted opens a new one (with backoff; Stats.Reconnects)
// and sends the calls in flight again, by their IDs, so each counts once.
// A fleet larger than the limits shares a few Clients through a rate limit
// service (tblimit serve, package service/ratelimit).
func Dial(clusterID uint64, addresses []string, opts ...Option) (*Client, error) {
	if len(addresses) == 0 {
		return nil, fmt.Errorf("ledger: dial: no addresses")
	}
	c, err := tb.NewClient(tb.ToUint128(clusterID), addresses)
	if errors.Is(err, tb.ErrInvalidAddress) || errors.Is(err, tb.ErrAddressLimitExceeded) {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidAddress, strings.Join(addresses, ","), err)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: dial %v: %w", addresses, err)
	}
	cl := New(c, opts...)
	cl.closeTB = true
	cl.conn.SetRedial(func() (tb.Client, error) { return tb.NewClient(tb.ToUint128(clusterID), addresses) })
	return cl, nil
}

// WithReconnect makes a Client whose session the cluster evicted open a
// new TigerBeetle client with dial and send its calls in flight again (see
// Dial, which sets it). For clients of your own making, and tests.
func WithReconnect(dial func() (tb.Client, error)) Option {
	return func(c *Client) { c.conn.SetRedial(dial) }
}

// Close releases the connection if Dial made it. Calls still waiting for an
// unresponsive cluster return ErrUnavailable.
func (c *Client) Close() {
	if c.closeTB {
		c.conn.Close()
	}
}

// Ping waits until the cluster answers, or ctx is done.
func (c *Client) Ping(ctx context.Context) error { return c.conn.Ping(ctx) }

// lookupAccount returns the account with id, or ok=false.
func (c *Client) lookupAccount(ctx context.Context, id ID) (tb.Account, bool, error) {
	as, err := c.conn.LookupAccounts(ctx, []tb.Uint128{id.tb()})
	if err != nil || len(as) == 0 {
		return tb.Account{}, false, err
	}
	return as[0], true, nil
}

// BatchMax is the most events one TigerBeetle request carries.
const BatchMax = conn.BatchMax
