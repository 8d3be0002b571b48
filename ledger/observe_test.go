package ledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

type requestLog struct {
	mu sync.Mutex
	rs []ledger.RequestEvent
}

func (l *requestLog) ObserveRequest(e ledger.RequestEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rs = append(l.rs, e)
}

type callKey struct{}

// A RequestObserver is told of each request with the contexts of the calls
// it served: the decision's create_transfers carries the caller's context.
func TestRequestObserver(t *testing.T) {
	log := &requestLog{}
	c := ledger.New(embedded.New(), ledger.WithRequestObserver(log))
	ctx := context.Background()
	r := ledger.Resource{Name: "api", Ledger: 1, Kind: ledger.KindRequests, Window: time.Minute, DefaultLimit: 1, Lazy: true}
	if err := c.CreateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	call := context.WithValue(ctx, callKey{}, "call")
	for range 2 {
		if _, err := c.Acquire(call, r, ledger.Request{User: "alice", Amount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	var creates []ledger.RequestEvent
	for _, e := range log.rs {
		if e.Operation == "create_transfers" {
			creates = append(creates, e)
		}
		if e.Events <= 0 || e.Start.IsZero() {
			t.Errorf("ObserveRequest(%+v): want events and a start", e)
		}
	}
	if len(creates) < 2 {
		t.Fatalf("create_transfers requests = %d, want at least 2 (one per Acquire): %+v", len(creates), log.rs)
	}
	last := creates[len(creates)-1]
	if len(last.Calls) != 1 || last.Calls[0].Value(callKey{}) != "call" {
		t.Errorf("the denial's create_transfers: Calls = %v, want the caller's context", last.Calls)
	}
	if last.Failed != 1 || last.Err != nil {
		t.Errorf("the denial's create_transfers: Failed = %d, Err = %v; want 1, nil", last.Failed, last.Err)
	}
}

// A Check's read of its users' accounts, made by the pipeline between
// batches, carries the checking call's context.
func TestRequestObserverCheck(t *testing.T) {
	log := &requestLog{}
	c := ledger.New(embedded.New(), ledger.WithRequestObserver(log))
	ctx := context.Background()
	r := ledger.Resource{Name: "api", Ledger: 1, Kind: ledger.KindRequests, Window: time.Minute, DefaultLimit: 1, Lazy: true}
	if err := c.CreateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	log.rs = nil
	log.mu.Unlock()
	if _, err := c.Check(context.WithValue(ctx, callKey{}, "check"), r, ledger.Request{User: "bob", Amount: 1}); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, e := range log.rs {
		if e.Operation == "lookup_accounts" && len(e.Calls) == 1 && e.Calls[0].Value(callKey{}) == "check" {
			return
		}
	}
	t.Errorf("no lookup_accounts with the Check's context among %+v", log.rs)
}
