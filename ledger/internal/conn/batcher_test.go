package conn

import (
	"context"
	"errors"
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
		b := NewBatcher(func(items []int) {
			if running.Add(1) != 1 {
				t.Error("two batches at once")
			}
			batches.Add(1)
			for _, i := range items {
				seen[i].Add(1)
			}
			time.Sleep(50 * time.Microsecond)
			running.Add(-1)
		}, inline, 0, 0)
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
	bounds := []struct {
		name  string
		bound func() (context.Context, time.Duration, context.CancelFunc)
	}{
		{"context deadline", func() (context.Context, time.Duration, context.CancelFunc) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			return ctx, 0, cancel
		}},
		{"wait", func() (context.Context, time.Duration, context.CancelFunc) {
			return context.Background(), 50 * time.Millisecond, func() {}
		}},
	}
	for _, bc := range bounds {
		t.Run(bc.name, func(t *testing.T) {
			release := make(chan struct{})
			var ran sync.Map
			b := NewBatcher(func(items []string) {
				for _, it := range items {
					ran.Store(it, true)
				}
				<-release // a request that never answers until released
			}, false, 0, 0)
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
				t.Fatalf("two calls bounded at 50ms took %v", took)
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
	b := NewBatcher(func([]int) { running <- struct{}{}; <-release }, false, 0, 2)
	go b.Do(context.Background(), 0, 0) // hangs in its batch
	<-running
	for i := 1; i <= 2; i++ { // wait behind it: the queue is full
		go b.Do(context.Background(), 0, i)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		b.mu.Lock()
		n := len(b.queue)
		b.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers queued, want 2", n)
		}
		time.Sleep(time.Millisecond)
	}
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
