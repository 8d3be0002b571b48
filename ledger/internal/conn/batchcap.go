package conn

import (
	"sync"
	"sync/atomic"
)

// batchCap learns how many events one request of an operation may carry.
// A cluster takes up to BatchMax, a --development server fewer, and a
// request that is too large is refused whole (the client refuses it before
// sending), so it can be sent again smaller. The cap is bisected between
// the largest size that went through and the smallest that was refused:
// after a refusal it drops, and full-size requests that go through raise it
// again towards the real limit.
type batchCap struct {
	cur       atomic.Int64 // the size to send
	mu        sync.Mutex
	good, bad int64 // largest accepted, smallest refused (BatchMax+1: none yet)
}

func newBatchCap() *batchCap {
	b := &batchCap{bad: BatchMax + 1}
	b.cur.Store(BatchMax)
	return b
}

func (b *batchCap) size() int { return int(b.cur.Load()) }

// refused records that a request of n events was refused as too large.
func (b *batchCap) refused(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bad = min(b.bad, int64(n))
	if b.good >= b.bad {
		b.good = 0 // the cluster takes less than it did: learn again
	}
	b.cur.Store(max((b.good+b.bad)/2, 1))
}

// accepted records that a request of n events went through.
func (b *batchCap) accepted(n int) {
	if int64(n) < b.cur.Load() {
		return // smaller than the cap: says nothing new
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.good = max(b.good, int64(n))
	if b.bad <= BatchMax {
		b.cur.Store(max((b.good+b.bad)/2, b.good))
	}
}
