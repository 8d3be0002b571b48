package conn

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Batcher runs work submitted concurrently in batches, one request at a
// time: what arrives while a batch is in flight waits and goes together in
// the next one (group commit). That matches a TigerBeetle client, which
// keeps one request in flight and packs what waits into the next, and lets
// the caller of a Batcher know exactly which of its own writes a later read
// follows.
//
// Who runs a batch depends on the client. In process, calls never block, so
// the caller that finds the Batcher idle runs the batch itself and hands the
// next one to a caller that waits: a caller alone switches no goroutine.
// With a cluster, a request may take far longer than a caller's deadline,
// so batches run on a goroutine of their own, started when work arrives and
// ended when none is left, and each caller waits only until its deadline.
// There, as a TigerBeetle client does, the next batch is sent as soon as the
// last one's answer came, from the goroutine the answer woke, and the last
// one is completed (its answer read, its callers answered) on a goroutine
// of its own while the next is in flight, unless the Runner asks for quiet.
type Batcher[T any] struct {
	runner Runner[T]
	inline bool
	gather time.Duration

	mu     sync.Mutex
	queue  []*entry[T]
	busy   bool      // a batch is being run, completed or handed over
	bufs   [2][]T    // the runner's batches, reused: one in flight, one completing
	turn   int       // the buffer of the next batch
	max    int       // the most callers that may wait in the queue (0: no bound)
	free   sync.Pool // entries free for reuse
	timers sync.Pool // stopped timers free for reuse (see timer)
}

// Runner runs the batches of a Batcher.
type Runner[T any] interface {
	// Send sends batch's request, if it needs one, and returns when the
	// answer came, as a Flight to complete. settled says that every
	// earlier batch has completed: only then may Send send what must
	// follow their writes (a read). The last batch may be completing on
	// another goroutine all the while Send runs, and after it returns:
	// Send must touch nothing Complete does. The items of batch are the
	// Runner's until the Flight has completed.
	//
	// more takes into this batch, of the calls that came since it was
	// taken, those keep accepts, and returns them (theirs too until the
	// Flight has completed): for a Send that waits for a request of its
	// own before the batch's (new users' accounts), so that the calls that
	// came meanwhile ride on the batch's request instead of waiting for
	// the next batch's. keep is called with the Batcher's lock held. A
	// Batcher whose calls never wait (in process) takes nothing.
	Send(batch []T, settled bool, more func(keep func(T) bool) []T) Flight
	// Quiet reports whether the last batch must complete before the next
	// is sent: for a read that must follow its writes, or a batch built
	// from what it teaches. It is called while no batch is completing.
	Quiet() bool
}

// Flight is a batch whose answer came.
type Flight interface {
	Complete() // reads the answer; every item is answered when it returns
}

// Func runs each batch to completion within Send: a Runner whose batches
// never overlap.
type Func[T any] func(batch []T)

// Send runs batch.
func (f Func[T]) Send(batch []T, _ bool, _ func(func(T) bool) []T) Flight { f(batch); return landed{} }

// Quiet is always true: Send has completed every batch.
func (Func[T]) Quiet() bool { return true }

type landed struct{}

func (landed) Complete() {}

type entry[T any] struct {
	item  T
	done  chan bool // receives false when its batch ran, true when it must lead the next (inline)
	taken bool      // in a batch: sent, or being sent (under mu)
}

// NewBatcher returns a Batcher whose batches r runs. inline says that calls
// never block (an in-process engine); gather holds each batch back that
// long to let more work arrive; maxWaiting bounds the callers waiting at
// once (0: no bound).
func NewBatcher[T any](r Runner[T], inline bool, gather time.Duration, maxWaiting int) *Batcher[T] {
	return &Batcher[T]{runner: r, inline: inline, gather: gather, max: maxWaiting}
}

// Do runs item in a batch and returns when that batch has run, or when ctx
// is done first, or, if wait is positive, when wait has passed first (a
// default timeout, cheaper than a context of its own). sent reports whether
// item was handed to run: when Do returns an error with sent false, item was
// never run and never will be.
func (b *Batcher[T]) Do(ctx context.Context, wait time.Duration, item T) (sent bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, Unavailable(err)
	}
	e := b.entry(item)
	b.mu.Lock()
	if b.max > 0 && len(b.queue) >= b.max {
		b.mu.Unlock()
		return false, fmt.Errorf("%w: %d calls already waiting for the cluster", ErrUnavailable, b.max)
	}
	b.queue = append(b.queue, e)
	if b.inline {
		err := b.doInline(e)
		b.release(e)
		return true, err
	}
	if !b.busy {
		b.busy = true
		go b.loop()
	}
	b.mu.Unlock()
	var expired <-chan time.Time
	if wait > 0 {
		t := b.timer(wait)
		defer b.putTimer(t)
		expired = t.C
	}
	var cause error
	select {
	case <-e.done:
		b.release(e)
		return true, nil
	case <-ctx.Done():
		cause = context.Cause(ctx)
	case <-expired:
		cause = context.DeadlineExceeded
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.taken {
		return true, Unavailable(cause) // its batch will still signal e: not released
	}
	for i, q := range b.queue {
		if q == e {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			break
		}
	}
	b.release(e)
	return false, Unavailable(cause)
}

// timer returns a timer that fires once after d, reused if one is free.
// A context with a timeout of its own costs a caller several allocations
// and a registration with its parent; a reused timer costs neither.
func (b *Batcher[T]) timer(d time.Duration) *time.Timer {
	if t, _ := b.timers.Get().(*time.Timer); t != nil {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// putTimer stops t and makes it free for reuse. A timer that fired
// unread is drained first: with Go 1.23's timers its channel holds
// nothing, but a program whose go.mod asks for older semantics (or that
// sets GODEBUG asynctimerchan=1) keeps the tick buffered, and the next
// caller to reuse t would take it for its own deadline.
func (b *Batcher[T]) putTimer(t *time.Timer) {
	stopTimer(t)
	b.timers.Put(t)
}

// stopTimer stops t and drains a tick it left unread (see putTimer).
func stopTimer(t *time.Timer) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
}

// entry returns an entry for item, reused if one is free.
func (b *Batcher[T]) entry(item T) *entry[T] {
	e, _ := b.free.Get().(*entry[T])
	if e == nil {
		e = &entry[T]{done: make(chan bool, 1)}
	}
	e.item = item
	return e
}

// release makes e free for reuse: nobody will signal it any more.
func (b *Batcher[T]) release(e *entry[T]) {
	var zero T
	e.item, e.taken = zero, false
	b.free.Put(e)
}

// doInline queues e and runs batches on the caller's goroutine when it is
// its turn. b.mu is held on entry and released.
func (b *Batcher[T]) doInline(e *entry[T]) error {
	if b.busy {
		b.mu.Unlock()
		if !<-e.done {
			return nil // a leader ran it
		}
		b.mu.Lock() // handed the lead: run what waits now, e included
	}
	b.busy = true
	batch := b.take()
	b.mu.Unlock()
	b.runBatch(batch)
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.busy = false
		b.mu.Unlock()
	} else {
		next := b.queue[0]
		b.mu.Unlock()
		next.done <- true // the lead stays taken; one waiting caller runs the next batch
	}
	for _, x := range batch {
		if x != e {
			x.done <- false
		}
	}
	return nil
}

// loop runs batches until none is left. The next batch goes as soon as
// the last one's answer came, from this goroutine, which the answer woke,
// and the last one completes on a goroutine of its own while the next is
// in flight: neither this process's reading of an answer and waking of its
// callers, nor a goroutine switch, stands between an answer and the next
// request. A closed loop of callers then splits into two halves that take
// turns, each riding every other request, as with a TigerBeetle client,
// which sends the next request before it answers the callers of the last.
// When the Runner asks for quiet, the last batch completes first, and the
// next waits a moment for its callers (regather).
func (b *Batcher[T]) loop() {
	back := 0            // callers to wait for before the next batch (see regather)
	var last []*entry[T] // answered, not completed
	var lastF Flight
	var completing chan struct{} // closed when a batch completing on its own goroutine has
	for {
		if completing != nil {
			<-completing // what the next batch is built from is the runner's again
			completing = nil
		}
		if lastF != nil && b.runner.Quiet() {
			back = b.complete(lastF, last)
			last, lastF = nil, nil
		}
		if b.gather > 0 {
			time.Sleep(b.gather)
		}
		b.regather(back)
		back = 0
		b.mu.Lock()
		batch := b.take()
		if len(batch) == 0 && lastF == nil {
			b.busy = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		if len(batch) == 0 {
			back = b.complete(lastF, last)
			last, lastF = nil, nil
			continue
		}
		settled := lastF == nil
		if !settled {
			completing = make(chan struct{})
			go func(f Flight, batch []*entry[T], done chan struct{}) {
				f.Complete()
				answer(batch)
				close(done)
			}(lastF, last, completing)
		}
		more := func(keep func(T) bool) []T {
			b.mu.Lock()
			extra := b.takeIf(keep)
			b.mu.Unlock()
			batch = append(batch, extra...)
			items := make([]T, len(extra))
			for i, e := range extra {
				items[i] = e.item
			}
			return items
		}
		f := b.runner.Send(b.items(batch), settled, more)
		last, lastF = batch, f // batch, with what more took into it
	}
}

// complete completes f, the flight of batch, and answers its callers. It
// returns how many callers the next batch should wait for: none when many
// wait already, which are then sent at once while this batch's callers are
// answered.
func (b *Batcher[T]) complete(f Flight, batch []*entry[T]) (back int) {
	f.Complete()
	b.mu.Lock()
	waiting := len(b.queue)
	b.mu.Unlock()
	if waiting >= 32 && 2*waiting >= len(batch) {
		go answer(batch)
		return 0
	}
	answer(batch)
	return waiting + len(batch) // wait a moment for them to come back
}

// answer tells the callers of a batch that it ran.
func answer[T any](batch []*entry[T]) {
	for _, e := range batch {
		e.done <- false
	}
}

// regather waits, for at most regatherMax, until the queue holds back
// items: those that waited when the last batch was answered and as many
// more as it had callers, so that they can ride the next request instead
// of the one after it. It serves a batch that completed before the next
// was sent (a quiet Runner): without it, the callers of a closed loop
// split into two halves that take turns, each waiting for a whole request
// and the other's completion, where overlapping batches wait only for the
// request.
func (b *Batcher[T]) regather(back int) {
	if back < 2 {
		return
	}
	deadline := time.Now().Add(regatherMax)
	for {
		b.mu.Lock()
		n := len(b.queue)
		b.mu.Unlock()
		if n >= back || time.Now().After(deadline) {
			return
		}
		runtime.Gosched()
	}
}

// regatherMax bounds regather: a few percent of a request's round trip.
const regatherMax = 50 * time.Microsecond

// take empties the queue into a batch. b.mu is held.
func (b *Batcher[T]) take() []*entry[T] {
	if b.inline && b.gather > 0 && len(b.queue) > 0 {
		b.mu.Unlock()
		time.Sleep(b.gather)
		b.mu.Lock()
	}
	batch := b.queue
	b.queue = nil
	for _, e := range batch {
		e.taken = true
	}
	return batch
}

// takeIf takes the calls in the queue that keep accepts, leaving the
// others in their order. b.mu is held.
func (b *Batcher[T]) takeIf(keep func(T) bool) []*entry[T] {
	var taken []*entry[T]
	n := 0
	for _, e := range b.queue {
		if keep(e.item) {
			e.taken = true
			taken = append(taken, e)
			continue
		}
		b.queue[n] = e
		n++
	}
	clear(b.queue[n:])
	b.queue = b.queue[:n]
	return taken
}

// items returns the items of batch, in the buffer of its turn: one batch
// may be in flight while the one before it completes. Only the runner
// calls it.
func (b *Batcher[T]) items(batch []*entry[T]) []T {
	buf := &b.bufs[b.turn]
	b.turn ^= 1
	clear(*buf)
	items := (*buf)[:0]
	for _, e := range batch {
		items = append(items, e.item)
	}
	*buf = items
	return items
}

// runBatch runs batch to completion. Only the runner calls it.
func (b *Batcher[T]) runBatch(batch []*entry[T]) {
	b.runner.Send(b.items(batch), true, noMore[T]).Complete()
}

// noMore is the more of a batch run in process: its calls never wait, so
// none rides on another's request.
func noMore[T any](func(T) bool) []T { return nil }
