package simnet

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Client is a tb.Client that sends every call through a model of the
// TigerBeetle client and of a cluster's costs (see the package doc): one
// request in flight, concurrent calls of one operation merged into the next
// request up to its size limit, each request taking the time its Model
// gives, and the Faults set. The calls themselves are applied to the
// wrapped tb.Client, each on its own.
//
// Create one with New and share it between goroutines, as a real client is
// shared; the zero value is not usable. Close ends it (it does not close the
// wrapped client). Nop costs a round trip of its own (see Client.Nop).
type Client struct {
	tb         tb.Client
	clk        clock
	rng        *rand.Rand    // the dispatcher's only
	debt       time.Duration // compaction owed (see Model); the dispatcher's only
	registered atomic.Bool   // the first request or Nop was sent (see Model.Register)

	mu      sync.Mutex
	wake    *sync.Cond // the dispatcher waits on it for a request to send
	model   Model
	faults  Faults
	release chan struct{} // closed by Release: lets go the requests held now
	closed  bool
	busy    bool       // a request is in flight, or sent and about to be
	sent    *request   // sent, not yet taken by the dispatcher
	pending []*request // waiting for the one in flight, in order
	stats   Stats

	closing chan struct{} // closed by Close
	done    chan struct{} // closed when the dispatcher has returned
}

// Option configures a Client.
type Option func(*Client)

// WithSeed seeds the random choices of the model's stalls and of the
// faults (default 1).
func WithSeed(seed uint64) Option {
	return func(c *Client) { c.rng = rand.New(rand.NewPCG(seed, seed^0x5eed)) }
}

// WithFaults sets the faults injected from the start (see SetFaults).
func WithFaults(f Faults) Option { return func(c *Client) { c.faults = f } }

// withClock runs the Client on clk (tests).
func withClock(clk clock) Option { return func(c *Client) { c.clk = clk } }

// New returns a Client that applies calls to c at the cost m gives. Close
// does not close c.
func New(c tb.Client, m Model, opts ...Option) *Client {
	cl := &Client{tb: c, clk: systemClock{}, model: m, release: make(chan struct{}),
		closing: make(chan struct{}), done: make(chan struct{})}
	WithSeed(1)(cl)
	for _, o := range opts {
		o(cl)
	}
	cl.wake = sync.NewCond(&cl.mu)
	go cl.dispatch()
	return cl
}

var _ tb.Client = (*Client)(nil)

// SetModel replaces the costs of the requests sent from now on.
func (c *Client) SetModel(m Model) {
	c.mu.Lock()
	c.model = m
	c.mu.Unlock()
}

// Model returns the costs being applied.
func (c *Client) Model() Model {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.model
}

// Close makes every call still waiting, and every later one, return
// tb.ErrClientClosed, and lets go of held requests. A call in flight returns
// tb.ErrClientClosed too, although it may have been applied, as with the real
// client. Close waits for the Client's goroutine to end; the wrapped client
// stays open.
func (c *Client) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.closing)
		if c.sent != nil {
			c.pending = append([]*request{c.sent}, c.pending...)
			c.sent = nil
		}
		for _, r := range c.pending {
			r.finish(tb.ErrClientClosed)
		}
		c.pending = nil
		c.wake.Broadcast()
	}
	c.mu.Unlock()
	<-c.done
}

// call is one call of a tb.Client method: its events become one batch of a
// request.
type call struct {
	op      Op
	events  int // events sent: accounts, transfers, IDs, filters
	results int // results the client makes room for in the reply
	// apply applies the call to the wrapped client, keeps its answer and
	// says what it did.
	apply func() (outcome, error)
	err   error
	done  chan struct{}
}

// request is what one round trip carries: calls of one operation.
type request struct {
	op              Op
	calls           []*call
	events, results int
	sentAt          time.Time // when it left, if the client was idle
}

func (r *request) add(cl *call) {
	r.calls = append(r.calls, cl)
	r.events += cl.events
	r.results += cl.results
}

// finish ends every call of r; err, if not nil, replaces their errors.
func (r *request) finish(err error) {
	for _, cl := range r.calls {
		if err != nil {
			cl.err = err
		}
		close(cl.done)
	}
}

// do sends cl and waits for its answer.
func (c *Client) do(cl *call) error {
	s := shapes[cl.op]
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return tb.ErrClientClosed
	}
	limit := c.model.batchSizeLimit()
	if cl.events > s.eventMax(limit) || cl.results > s.resultMax(limit) {
		c.mu.Unlock()
		return tb.ErrTooMuchData
	}
	cl.done = make(chan struct{})
	c.stats.Ops[cl.op].Calls++
	c.enqueue(cl, s, limit)
	c.mu.Unlock()
	<-cl.done
	return cl.err
}

// enqueue sends cl at once if nothing is in flight; else it joins the first
// waiting request of its operation it fits in, or waits in a new one. That
// is what tb_client does (packet.zig, batch_enqueue): FIFO by request,
// concurrent calls of an operation packed into the earliest request with
// room. enqueue requires c.mu.
func (c *Client) enqueue(cl *call, s shape, limit int) {
	if !c.busy {
		c.busy = true
		c.sent = &request{op: cl.op, sentAt: c.clk.Now()}
		c.sent.add(cl)
		c.wake.Signal()
		return
	}
	if s.multiBatch {
		for _, r := range c.pending {
			if r.op == cl.op && s.fits(limit, len(r.calls)+1, r.events+cl.events, r.results+cl.results) {
				r.add(cl)
				return
			}
		}
	}
	r := &request{op: cl.op}
	r.add(cl)
	c.pending = append(c.pending, r)
}

// dispatch sends requests one at a time until the Client is closed.
func (c *Client) dispatch() {
	defer close(c.done)
	var free time.Time // when the request in flight ends, in model time
	c.mu.Lock()
	for {
		for c.sent == nil && !c.closed {
			c.wake.Wait()
		}
		if c.closed {
			c.mu.Unlock()
			return
		}
		r := c.sent
		c.sent = nil
		m, f, release := c.model, c.faults, c.release
		st := &c.stats.Ops[r.op]
		st.Requests++
		st.Events += uint64(r.events)
		c.mu.Unlock()

		start := free
		if r.sentAt.After(start) {
			start = r.sentAt // it left an idle client
		}
		end, ok, evicted := start, true, f.Evict
		if !evicted {
			end, ok = c.serve(r, start, &m, &f, release)
		}
		free = end

		c.mu.Lock()
		c.stats.Busy += end.Sub(start)
		if !ok || c.closed {
			r.finish(tb.ErrClientClosed)
			continue
		}
		// The next request leaves before this one's answers are handed
		// out, as in tb_client: callers woken by them wait for the one
		// after.
		if len(c.pending) > 0 {
			c.sent = c.pending[0]
			c.sent.sentAt = end
			c.pending = c.pending[1:]
		} else {
			c.busy = false
		}
		var err error
		if evicted {
			c.stats.Evicted++
			err = tb.ErrClientEvicted
		}
		c.mu.Unlock()
		r.finish(err)
		c.mu.Lock()
	}
}

// serve applies r as a request that left at start, waits until it ends in
// model time (unless applying took longer) and returns that end, and false
// if the Client was closed meanwhile.
func (c *Client) serve(r *request, start time.Time, m *Model, f *Faults, release <-chan struct{}) (time.Time, bool) {
	if f.Stall || c.draw(f.DropRequest) {
		if f.Stall {
			c.note(func(s *Stats) { s.Stalled++ })
		} else {
			c.note(func(s *Stats) { s.DroppedRequests++ })
		}
		released, ok := c.hold(f.Hold, release)
		if !ok {
			return released, false
		}
		start = released // the retry leaves now
	}
	twice := c.draw(f.Duplicate)
	t0 := c.clk.Now()
	o := r.apply()
	if twice {
		c.note(func(s *Stats) { s.Duplicated++ })
		o = o.add(r.apply())
	}
	took := c.clk.Now().Sub(t0)
	cost := m.cost(r.op, o, c.rng, &c.debt)
	if !c.registered.Swap(true) {
		cost += m.Register
	}
	if f.Delay > 0 {
		cost += time.Duration(c.rng.Int64N(int64(f.Delay)))
	}
	// If the wrapped client took longer than the model, the request took
	// that long, no more. Time the process was not scheduled (a late
	// start) is not the server's: a late dispatcher catches up.
	if took > cost {
		c.note(func(s *Stats) { s.Overran++ })
		cost = took
	}
	end := start.Add(cost)
	c.clk.SleepUntil(end, c.closing)
	if c.draw(f.DropReply) {
		c.note(func(s *Stats) { s.DroppedReplies++ })
		released, ok := c.hold(f.Hold, release)
		return later(end, released), ok
	}
	select {
	case <-c.closing:
		return end, false
	default:
		return end, true
	}
}

// apply applies every call of r, each as its own batch, and adds up what
// they did.
func (r *request) apply() outcome {
	var o outcome
	for _, cl := range r.calls {
		p, err := cl.apply()
		cl.err = err
		o = o.add(p)
	}
	return o
}

// draw reports true with probability p.
func (c *Client) draw(p float64) bool { return p > 0 && c.rng.Float64() < p }

// note updates the stats with f.
func (c *Client) note(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
