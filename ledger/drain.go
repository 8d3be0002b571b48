package ledger

import (
	"sync"
	"sync/atomic"
	"time"
)

// drainCache remembers users whose accounts were seen drained (nothing
// available), so that their next calls are denied without any I/O until the
// first of their units in flight returns. That is exact: units return only
// by expiring, at instants the cache knows. Only a limit raised or units
// voided elsewhere are missed, and for at most maxDenyCache (in process) or
// maxDenyCacheRemote (on a cluster). Calls that
// retry an attempt by its ID always go to the cluster.
type drainCache struct {
	n  atomic.Int64 // entries: most calls find none and take no lock
	mu sync.RWMutex
	m  map[ID]*drained
}

// maxDenyCache bounds how long a drained user is remembered, so that a
// limit raised by another process is seen within it. On a cluster the bound
// is shorter: a cluster frees expired units shortly after (not at) their
// expiry instant, so a denial read just after an expiry may not show that
// unit back yet, and the cache must not prolong that by more than about as
// much again.
const (
	maxDenyCache       = time.Second
	maxDenyCacheRemote = 100 * time.Millisecond
)

const drainCacheLimit = 1 << 18

type drained struct {
	until   uint64   // this Client's clock, ns: forget after it
	skew    int64    // cluster time minus this Client's clock when learnt, ns
	limit   uint64   // the user's limit
	flights []flight // units in flight that return first, in cluster time
	resetAt uint64   // cluster time the last unit in flight returns
}

// deny returns a local denial for amount units of account uid at local time
// now, if the account is known to be drained.
func (dc *drainCache) deny(uid ID, amount uint64, now uint64) (Decision, bool) {
	if dc.n.Load() == 0 {
		return Decision{}, false
	}
	dc.mu.RLock()
	dr, ok := dc.m[uid]
	dc.mu.RUnlock()
	if !ok {
		return Decision{}, false
	}
	if now >= dr.until {
		dc.mu.Lock()
		if dc.m[uid] == dr {
			delete(dc.m, uid)
			dc.n.Store(int64(len(dc.m)))
		}
		dc.mu.Unlock()
		return Decision{}, false
	}
	cluster := uint64(int64(now) + dr.skew)
	d := Decision{Reason: LimitExceeded, Limit: dr.limit, RetryAfter: -1, Timestamp: cluster,
		ResetAfter: time.Duration(dr.resetAt - min(cluster, dr.resetAt))}
	if amount <= dr.limit {
		d.RetryAfter = releaseAfter(dr.flights, cluster, amount)
		if d.RetryAfter < 0 { // more than the flights read: at least until the cache is refreshed
			d.RetryAfter = time.Duration(dr.until - now)
		}
	}
	return d, true
}

// learn records that account uid was drained at cluster time clusterNow
// (local time localNow), with its first units in flight and the instant the
// last one returns.
func (dc *drainCache) learn(uid ID, limit uint64, flights []flight, resetAt, clusterNow, localNow uint64, bound time.Duration) {
	if len(flights) == 0 {
		return
	}
	first := flights[0].expires - min(clusterNow, flights[0].expires)
	dr := &drained{
		until:   localNow + min(first, uint64(bound)),
		skew:    int64(clusterNow) - int64(localNow),
		limit:   limit,
		flights: flights,
		resetAt: resetAt,
	}
	dc.mu.Lock()
	if dc.m == nil || len(dc.m) >= drainCacheLimit {
		dc.m = make(map[ID]*drained)
	}
	dc.m[uid] = dr
	dc.n.Store(int64(len(dc.m)))
	dc.mu.Unlock()
}

// denyCacheBound is how long c may remember a drained user.
func (c *Client) denyCacheBound() time.Duration {
	if c.inProcess {
		return maxDenyCache
	}
	return maxDenyCacheRemote
}

// forget drops what is known of account uid (its limit changed here).
func (dc *drainCache) forget(uid ID) {
	if dc.n.Load() == 0 {
		return
	}
	dc.mu.Lock()
	delete(dc.m, uid)
	dc.n.Store(int64(len(dc.m)))
	dc.mu.Unlock()
}
