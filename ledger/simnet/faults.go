package simnet

import "time"

// Faults are failures a Client injects, for tests. The zero value injects
// none. Random choices are drawn from the Client's seeded generator (see
// WithSeed), one request at a time: the same calls in the same order get the
// same faults.
//
// Like the real client, a Client keeps one request in flight and retries it
// for ever: a request that is held (stalled, or lost and being retried) holds
// up every call behind it. It is let go when Hold has passed, when Release or
// SetFaults is called (the cluster answers again), or when the Client is
// closed (its calls return tb.ErrClientClosed).
type Faults struct {
	// Stall holds every request before it is applied, like a cluster that
	// is down: nothing is applied while it is held; once let go (but not
	// at Close) it is applied and answered, as the client's retry would
	// be. While Stall is set, every new request is held again.
	Stall bool
	// DropRequest is the probability that a request is lost on its way to
	// the cluster: it is held like a stalled one, then applied and answered.
	DropRequest float64
	// DropReply is the probability that the reply of an applied request is
	// lost: the request is applied at once, but its calls do not return
	// until it is let go (the retry gets the cached reply). At Close they
	// return tb.ErrClientClosed although it was applied.
	DropReply float64
	// Duplicate is the probability that a request is applied twice, one
	// application right after the other, as an application that resent it
	// would see: each call gets the second answer (for a create that the
	// first applied, TransferExists or AccountExists; for one that failed
	// for a transient reason, id_already_failed).
	Duplicate float64
	// Delay adds to every request an extra latency drawn uniformly from
	// [0, Delay), during which it stays in flight.
	Delay time.Duration
	// Evict answers every request with tb.ErrClientEvicted, applying
	// nothing, like a cluster that evicted this client's session: the
	// client is of no more use (ledger opens a new one; see
	// ledger.WithReconnect).
	Evict bool
	// Hold is how long a stalled or lost request stays held; 0 means until
	// Release, SetFaults or Close.
	Hold time.Duration
}

// SetFaults replaces the faults injected from the next request on, and lets
// go every request held by the old ones.
func (c *Client) SetFaults(f Faults) {
	c.mu.Lock()
	c.faults = f
	c.releaseLocked()
	c.mu.Unlock()
}

// Faults returns the faults being injected.
func (c *Client) Faults() Faults {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.faults
}

// Release lets go every request held now (stalled, or lost and being
// retried): it is applied if it was not yet, and answered. Faults stay as
// they are: with Stall set, the next request is held again.
func (c *Client) Release() {
	c.mu.Lock()
	c.releaseLocked()
	c.mu.Unlock()
}

// releaseLocked requires c.mu.
func (c *Client) releaseLocked() {
	close(c.release)
	c.release = make(chan struct{})
}

// hold keeps the request in flight until d has passed (d > 0), release is
// closed or the Client is closed, and returns when it was let go and
// whether the Client is still open.
func (c *Client) hold(d time.Duration, release <-chan struct{}) (time.Time, bool) {
	var timeout <-chan time.Time
	if d > 0 {
		timeout = c.clk.After(d)
	}
	select {
	case <-timeout:
	case <-release:
	case <-c.closing:
		return c.clk.Now(), false
	}
	return c.clk.Now(), true
}
