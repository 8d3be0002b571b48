package conn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every item runs exactly once, in batches one at a time, in both modes.
func TestBatcherRunsEveryItemOnce(t *testing.T) {
	for _, inline := range []bool{true, false} {
		var running, batches atomic.Int32
		seen := make([]atomic.Int32, 2000)
		b := NewBatcher(Func[int](func(items []int) {
			if running.Add(1) != 1 {
				t.Error("two batches at once")
			}
			batches.Add(1)
			for _, i := range items {
				seen[i].Add(1)
			}
			time.Sleep(50 * time.Microsecond)
			running.Add(-1)
		}), inline, 0, 0)
		var wg sync.WaitGroup
		for g := 0; g < 20; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g * 100; i < (g+1)*100; i++ {
					if sent, err := b.Do(context.Background(), 0, i); !sent || err != nil {
						t.Errorf("Do(%d) = %v, %v", i, sent, err)
					}
					if seen[i].Load() != 1 {
						t.Errorf("Do(%d) returned before its batch ran", i)
					}
				}
			}()
		}
		wg.Wait()
		for i := range seen {
			if n := seen[i].Load(); n != 1 {
				t.Fatalf("inline %v: item %d ran %d times", inline, i, n)
			}
		}
		if n := batches.Load(); n >= 2000 {
			t.Errorf("inline %v: %d batches for 2000 items from 20 callers: nothing batched", inline, n)
		}
	}
}

// A caller whose context ends, or whose wait passes, while its batch runs
// returns at once (sent: it may still be applied); one whose item was
// still waiting returns and the item never runs.
func TestBatcherCallerDeadlines(t *testing.T) {
	// Long enough for the batch loop to take the first item on a loaded machine.
	const bound = 250 * time.Millisecond
	bounds := []struct {
		name  string
		bound func() (context.Context, time.Duration, context.CancelFunc)
	}{
		{"context deadline", func() (context.Context, time.Duration, context.CancelFunc) {
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			return ctx, 0, cancel
		}},
		{"wait", func() (context.Context, time.Duration, context.CancelFunc) {
			return context.Background(), bound, func() {}
		}},
	}
	for _, bc := range bounds {
		t.Run(bc.name, func(t *testing.T) {
			release := make(chan struct{})
			var ran sync.Map
			b := NewBatcher(Func[string](func(items []string) {
				for _, it := range items {
					ran.Store(it, true)
				}
				<-release // a request that never answers until released
			}), false, 0, 0)
			start := time.Now()
			ctx, wait, cancel := bc.bound()
			defer cancel()
			sent, err := b.Do(ctx, wait, "first") // runs, and hangs
			if !sent || !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Do(first) = %v, %v; want sent, ErrUnavailable (deadline exceeded)", sent, err)
			}
			ctx2, wait2, cancel2 := bc.bound()
			defer cancel2()
			sent, err = b.Do(ctx2, wait2, "second") // waits behind the hung batch
			if sent || !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Do(second) = %v, %v; want not sent, ErrUnavailable (deadline exceeded)", sent, err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("two calls bounded at %v took %v", bound, took)
			}
			close(release)
			// A timer reused after a wait that fired must not end this call.
			if _, err := b.Do(context.Background(), time.Minute, "third"); err != nil {
				t.Fatal(err)
			}
			if _, ok := ran.Load("second"); ok {
				t.Fatal("an item whose caller gave up before it was sent ran")
			}
		})
	}
}

func TestBatcherBoundsWaitingCallers(t *testing.T) {
	release, running := make(chan struct{}), make(chan struct{}, 1)
	defer close(release)
	b := NewBatcher(Func[int](func([]int) { running <- struct{}{}; <-release }), false, 0, 2)
	go b.Do(context.Background(), 0, 0) // hangs in its batch
	<-running
	for i := 1; i <= 2; i++ { // wait behind it: the queue is full
		go b.Do(context.Background(), 0, i)
	}
	waitQueued(t, b, 2)
	start := time.Now()
	if _, err := b.Do(context.Background(), 0, 9); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Do with the queue full = %v, want ErrUnavailable at once", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Do with the queue full took %v", took)
	}
	go func() {
		for range running { // let the queued batch run once released
		}
	}()
}

// waitQueued waits, for up to 10 s, until n callers wait in b's queue.
func waitQueued[T any](t *testing.T, b *Batcher[T], n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		got := len(b.queue)
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers queued, want %d", got, n)
		}
	}
}

// stepRunner sends each batch as a request that the test answers by hand,
// and logs what the Batcher asks of it.
type stepRunner struct {
	t       *testing.T
	quiet   bool
	sent    chan []string // each batch sent
	release chan struct{} // answers the request in flight
	second  chan struct{} // closed when a second batch is sent

	mu     sync.Mutex
	log    []string
	flying int // requests sent and not answered
}

func (r *stepRunner) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *stepRunner) Send(batch []string, settled bool, _ func(func(string) bool) []string) Flight {
	r.mu.Lock()
	if r.flying != 0 {
		r.t.Errorf("%v sent while another request was in flight", batch)
	}
	r.flying++
	r.mu.Unlock()
	items := slices.Clone(batch)
	r.note(fmt.Sprintf("send %s settled=%v", strings.Join(items, ","), settled))
	if slices.Equal(items, []string{"b"}) {
		close(r.second)
	}
	r.sent <- items
	<-r.release
	r.mu.Lock()
	r.flying--
	r.mu.Unlock()
	return &stepFlight{r: r, items: items}
}

func (r *stepRunner) Quiet() bool { return r.quiet }

type stepFlight struct {
	r     *stepRunner
	items []string
}

func (f *stepFlight) Complete() {
	if !f.r.quiet && slices.Equal(f.items, []string{"a"}) {
		// a completes while b is sent, not before.
		select {
		case <-f.r.second:
		case <-time.After(10 * time.Second):
			f.r.t.Error("a completed before b was sent")
		}
	}
	f.r.note("complete " + strings.Join(f.items, ","))
}

// With a cluster, the next batch is sent as soon as the last one's answer
// came, and the last one completes (its callers answered) while the next
// is in flight; a Runner that asks for quiet has each batch completed
// before the next is sent. Never are two requests in flight.
func TestBatcherSendsTheNextBatchBeforeCompletingTheLast(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		t.Run(fmt.Sprintf("quiet=%v", quiet), func(t *testing.T) {
			r := &stepRunner{t: t, quiet: quiet, sent: make(chan []string, 4), release: make(chan struct{}), second: make(chan struct{})}
			b := NewBatcher[string](r, false, 0, 0)
			do := func(item string) chan error {
				done := make(chan error, 1)
				go func() {
					_, err := b.Do(context.Background(), 0, item)
					done <- err
				}()
				return done
			}
			a := do("a")
			<-r.sent // a's request is in flight
			c := do("b")
			waitQueued(t, b, 1)     // b, behind a's request
			r.release <- struct{}{} // a's answer
			if got := <-r.sent; !slices.Equal(got, []string{"b"}) {
				t.Fatalf("second batch %v, want [b]", got)
			}
			if err := <-a; err != nil { // answered while b's request is in flight
				t.Fatal(err)
			}
			r.release <- struct{}{} // b's answer
			if err := <-c; err != nil {
				t.Fatal(err)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if quiet {
				want := []string{"send a settled=true", "complete a", "send b settled=true", "complete b"}
				if !slices.Equal(r.log, want) {
					t.Fatalf("the runner was asked %q, want %q", r.log, want)
				}
				return
			}
			// a completes on a goroutine of its own while b is in flight.
			want := []string{"send a settled=true", "send b settled=false", "complete a", "complete b"}
			if !slices.Equal(r.log, want) {
				t.Fatalf("the runner was asked %q, want %q", r.log, want)
			}
		})
	}
}

// moreRunner's first batch waits, as for a request of its own, until the
// test has queued more calls, then takes those keep accepts into itself.
type moreRunner struct {
	started chan struct{} // closed when the first batch is being sent
	queued  chan struct{} // closed by the test once the later calls wait
	mu      sync.Mutex
	sent    [][]string
}

func (r *moreRunner) Send(batch []string, _ bool, more func(func(string) bool) []string) Flight {
	items := slices.Clone(batch)
	if slices.Equal(items, []string{"first"}) {
		close(r.started)
		<-r.queued
		items = append(items, more(func(s string) bool { return strings.HasPrefix(s, "rides") })...)
	}
	r.mu.Lock()
	r.sent = append(r.sent, items)
	r.mu.Unlock()
	return landed{}
}

func (r *moreRunner) Quiet() bool { return false }

// A Send that waits before its request takes the calls that came meanwhile
// and that may ride on it; they are answered with its batch, and the
// others go in the next batch.
func TestBatcherSendTakesMore(t *testing.T) {
	r := &moreRunner{started: make(chan struct{}), queued: make(chan struct{})}
	b := NewBatcher[string](r, false, 0, 0)
	var wg sync.WaitGroup
	do := func(s string) {
		wg.Go(func() {
			if _, err := b.Do(context.Background(), 0, s); err != nil {
				t.Errorf("Do(%s) = %v", s, err)
			}
		})
	}
	do("first")
	<-r.started
	for _, s := range []string{"rides-1", "waits", "rides-2"} {
		do(s)
	}
	waitQueued(t, b, 3)
	close(r.queued)
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, batch := range r.sent {
		slices.Sort(batch) // the callers queued in any order
	}
	if got := fmt.Sprint(r.sent); got != "[[first rides-1 rides-2] [waits]]" {
		t.Errorf("batches sent = %s, want [[first rides-1 rides-2] [waits]]", got)
	}
}
