package service_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tblimit/tblimit/service"
)

// A bound lets n calls in at once, refuses one more at once with
// RESOURCE_EXHAUSTED, and lets calls in again as they leave.
func TestBound(t *testing.T) {
	b, err := service.NewBound(2)
	if err != nil {
		t.Fatal(err)
	}
	l1, err1 := b.Enter()
	l2, err2 := b.Enter()
	if err1 != nil || err2 != nil || b.Len() != 2 || b.Cap() != 2 {
		t.Fatalf("two calls in a bound of 2: %v, %v, %d of %d", err1, err2, b.Len(), b.Cap())
	}
	if _, err := b.Enter(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a third call = %v, want RESOURCE_EXHAUSTED", err)
	}
	l1()
	l3, err := b.Enter()
	if err != nil {
		t.Fatalf("a call after one left = %v", err)
	}
	drained := make(chan struct{})
	go func() { b.Drain(); close(drained) }()
	l2()
	l3()
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return once every call left")
	}
	if _, err := service.NewBound(0); err == nil {
		t.Fatal("NewBound(0) = nil error")
	}
}

// AnswerBefore ends a call a fifth of the time left (at most 100 ms)
// before the caller's deadline, and leaves a call without one alone.
func TestAnswerBefore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	caller, _ := ctx.Deadline()
	inner, done := service.AnswerBefore(ctx)
	defer done()
	if dl, _ := inner.Deadline(); caller.Sub(dl) < 99*time.Millisecond || caller.Sub(dl) > 100*time.Millisecond {
		t.Fatalf("deadline %v before the caller's, want 100 ms", caller.Sub(dl))
	}
	if c, _ := service.AnswerBefore(context.Background()); c != context.Background() {
		t.Fatal("a call without a deadline got one")
	}
}
