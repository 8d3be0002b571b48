package simnet

import (
	"errors"
	"runtime"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// recorded reports whether the engine holds transfer id.
func (f *ledgerFixture) recorded(t *testing.T, id tb.Uint128) bool {
	t.Helper()
	got, err := f.e.LookupTransfers([]tb.Uint128{id})
	if err != nil {
		t.Fatal(err)
	}
	return len(got) == 1
}

// createAsync sends one transfer through c and returns its answer on a channel.
type answerT struct {
	res []tb.CreateTransferResult
	err error
}

func createAsync(c *Client, tr tb.Transfer) <-chan answerT {
	ch := make(chan answerT, 1)
	go func() {
		res, err := c.CreateTransfers([]tb.Transfer{tr})
		ch <- answerT{res, err}
	}()
	return ch
}

func stillWaiting(t *testing.T, ch <-chan answerT, what string) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s returned %+v while held", what, a)
	case <-time.After(20 * time.Millisecond):
	}
}

func created(t *testing.T, a answerT, want tb.CreateTransferStatus) {
	t.Helper()
	if a.err != nil || len(a.res) != 1 || a.res[0].Status != want {
		t.Fatalf("answer %+v, want %v", a, want)
	}
}

func TestStallHoldsEveryRequestUntilReleased(t *testing.T) {
	f := newLedger(t, 1, 10)
	c := New(f.e, flat(100*time.Microsecond), WithFaults(Faults{Stall: true}))
	defer c.Close()

	tr := f.take(0)
	ch := createAsync(c, tr)
	eventually(t, "the stall", func() bool { return c.Stats().Stalled == 1 })
	stillWaiting(t, ch, "a stalled call")
	if f.recorded(t, tr.ID) {
		t.Fatal("a stalled request was applied")
	}
	c.Release()
	created(t, <-ch, tb.TransferCreated)

	// Still stalled: the next request is held again, until the faults go.
	tr2 := f.take(0)
	ch = createAsync(c, tr2)
	eventually(t, "the second stall", func() bool { return c.Stats().Stalled == 2 })
	stillWaiting(t, ch, "a stalled call")
	c.SetFaults(Faults{})
	created(t, <-ch, tb.TransferCreated)
	if c.Faults() != (Faults{}) {
		t.Errorf("faults %+v, want none", c.Faults())
	}
}

func TestStallForAWhile(t *testing.T) {
	f := newLedger(t, 1, 10)
	clk := newFakeClock(true)
	c := New(f.e, flat(time.Millisecond), withClock(clk), WithFaults(Faults{Stall: true, Hold: 3 * time.Second}))
	defer c.Close()
	t0 := clk.Now()
	if _, err := c.CreateTransfers([]tb.Transfer{f.take(0)}); err != nil {
		t.Fatal(err)
	}
	if got, want := clk.Now().Sub(t0), 3*time.Second+time.Millisecond; got != want {
		t.Errorf("took %v, want the hold and then the request: %v", got, want)
	}
}

func TestDroppedRequestIsAppliedOnlyWhenRetried(t *testing.T) {
	f := newLedger(t, 1, 10)
	c := New(f.e, flat(100*time.Microsecond), WithFaults(Faults{DropRequest: 1}))
	defer c.Close()

	tr := f.take(0)
	ch := createAsync(c, tr)
	eventually(t, "the drop", func() bool { return c.Stats().DroppedRequests == 1 })
	stillWaiting(t, ch, "a lost request")
	// One request in flight: the calls behind it wait too.
	behind := make(chan error, 1)
	go func() { _, err := c.LookupAccounts(f.users); behind <- err }()
	waitCalls(t, c, LookupAccounts, 1)
	if f.recorded(t, tr.ID) {
		t.Fatal("a lost request was applied")
	}
	c.SetFaults(Faults{})
	created(t, <-ch, tb.TransferCreated)
	if err := <-behind; err != nil {
		t.Fatal(err)
	}
}

func TestDroppedReplyIsAppliedFirst(t *testing.T) {
	f := newLedger(t, 1, 10)
	c := New(f.e, flat(100*time.Microsecond), WithFaults(Faults{DropReply: 1}))
	defer c.Close()

	tr := f.take(0)
	ch := createAsync(c, tr)
	eventually(t, "the lost reply", func() bool { return c.Stats().DroppedReplies == 1 })
	if !f.recorded(t, tr.ID) {
		t.Fatal("the request of a lost reply was not applied")
	}
	stillWaiting(t, ch, "a call whose reply was lost")
	c.Release()
	created(t, <-ch, tb.TransferCreated)
}

func TestDuplicateAnswersTheSecondApplication(t *testing.T) {
	f := newLedger(t, 1, 1)
	c := New(f.e, flat(100*time.Microsecond), WithFaults(Faults{Duplicate: 1}))
	defer c.Close()

	tr := f.take(0)
	created(t, <-createAsync(c, tr), tb.TransferExists)
	acc, err := f.e.LookupAccounts(f.users[:1])
	if err != nil || len(acc) != 1 || acc[0].DebitsPending != tb.ToUint128(1) {
		t.Fatalf("user 0 = %+v, %v: want one unit taken once", acc, err)
	}
	// A denial applied twice: the retry of a failed ID.
	created(t, <-createAsync(c, f.take(0)), tb.TransferIDAlreadyFailed)
	if got := c.Stats().Duplicated; got != 2 {
		t.Errorf("duplicated %d, want 2", got)
	}
}

func TestDelayIsUniformUpToItsBound(t *testing.T) {
	f := newLedger(t, 1, 1)
	clk := newFakeClock(true)
	c := New(f.e, flat(100*time.Microsecond), withClock(clk), WithFaults(Faults{Delay: 2 * time.Millisecond}))
	defer c.Close()
	var longest time.Duration
	for range 1000 {
		before := clk.Now()
		if _, err := c.LookupAccounts(f.users); err != nil {
			t.Fatal(err)
		}
		longest = max(longest, clk.Now().Sub(before))
	}
	if longest >= 2100*time.Microsecond || longest < 2*time.Millisecond*9/10 {
		t.Errorf("longest call %v, want just under 2.1ms", longest)
	}
	if busy, want := c.Stats().Busy, 1000*1100*time.Microsecond; busy < want*9/10 || busy > want*11/10 {
		t.Errorf("busy %v, want about %v", busy, want)
	}
}

func TestFaultsAreSeeded(t *testing.T) {
	f := newLedger(t, 1, 1)
	run := func(seed uint64) Stats {
		clk := newFakeClock(true)
		c := New(f.e, flat(time.Microsecond), withClock(clk), WithSeed(seed),
			WithFaults(Faults{DropRequest: 0.1, DropReply: 0.1, Duplicate: 0.1, Hold: time.Millisecond}))
		defer c.Close()
		for range 500 {
			if _, err := c.LookupAccounts(f.users); err != nil {
				t.Fatal(err)
			}
		}
		return c.Stats()
	}
	a, b := run(3), run(3)
	if a != b {
		t.Errorf("seed 3 gave %+v then %+v", a, b)
	}
	if a.DroppedRequests == 0 || a.DroppedReplies == 0 || a.Duplicated == 0 {
		t.Errorf("stats %+v: want some of each fault", a)
	}
}

func TestCloseEndsEveryCall(t *testing.T) {
	f := newLedger(t, 2, 10)
	goroutines := runtime.NumGoroutine()
	c := New(f.e, flat(100*time.Microsecond), WithFaults(Faults{DropReply: 1}))

	held := f.take(0)
	first := createAsync(c, held)
	eventually(t, "the lost reply", func() bool { return c.Stats().DroppedReplies == 1 })
	queued := createAsync(c, f.take(1))
	waitCalls(t, c, CreateTransfers, 2)
	c.Close()
	for _, ch := range []<-chan answerT{first, queued} {
		if a := <-ch; !errors.Is(a.err, tb.ErrClientClosed) {
			t.Errorf("answer %+v, want ErrClientClosed", a)
		}
	}
	if !f.recorded(t, held.ID) {
		t.Error("the held request was applied before Close: the engine must still have it")
	}
	if _, err := c.LookupAccounts(f.users); !errors.Is(err, tb.ErrClientClosed) {
		t.Errorf("after Close: %v, want ErrClientClosed", err)
	}
	if err := c.Nop(); !errors.Is(err, tb.ErrClientClosed) {
		t.Errorf("Nop after Close: %v, want ErrClientClosed", err)
	}
	c.Close() // again: nothing
	if err := f.e.Nop(); err != nil {
		t.Errorf("the wrapped client was closed: %v", err)
	}
	eventually(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= goroutines })
}

func TestCloseDuringAStall(t *testing.T) {
	f := newLedger(t, 1, 10)
	c := New(f.e, Model{}, WithFaults(Faults{Stall: true}))
	tr := f.take(0)
	ch := createAsync(c, tr)
	eventually(t, "the stall", func() bool { return c.Stats().Stalled == 1 })
	c.Close()
	if a := <-ch; !errors.Is(a.err, tb.ErrClientClosed) {
		t.Errorf("answer %+v, want ErrClientClosed", a)
	}
	if f.recorded(t, tr.ID) {
		t.Error("a stalled request was applied at Close")
	}
}
