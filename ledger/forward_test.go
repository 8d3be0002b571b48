package ledger_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// A forwarded Client decides on the ledger of the Client whose Forward
// applies its operations, as a Client of the same cluster does: a request
// sent again under its ID counts once, and the holder sees what it did.
func TestForwardedIsACluster(t *testing.T) {
	ctx := t.Context()
	holder := ledger.New(embedded.New())
	remote := ledger.NewForwarded(holder.Forward, ledger.WithExactDecisions())
	r := ledger.Resource{Name: "api", Ledger: 1, Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 2}
	if err := remote.CreateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := remote.Provision(ctx, r, ledger.UserLimit{Key: "alice", Limit: 2}); err != nil {
		t.Fatal(err)
	}
	// "a" is sent twice, as after a lost answer: it counts once.
	for _, step := range []struct {
		id    string
		allow bool
	}{{"a", true}, {"a", true}, {"b", true}, {"c", false}} {
		d, err := remote.Acquire(ctx, r, ledger.Request{User: "alice", Amount: 1, ID: ledger.KeyID(step.id)})
		if err != nil || d.Allowed != step.allow {
			t.Fatalf("Acquire(ID %s) = %+v, %v; want allowed %v", step.id, d, err, step.allow)
		}
	}
	if u, err := holder.Inspect(ctx, r, "alice"); err != nil || u.Limit != 2 || u.InFlight != 2 {
		t.Errorf("the holder's Inspect(alice) = %+v, %v; want limit 2, 2 in flight", u, err)
	}
	if hs, err := remote.History(ctx, r, "alice", time.Time{}, time.Time{}, 10); err != nil || len(hs) != 2 {
		t.Errorf("History(alice), forwarded = %v, %v; want 2 admissions", hs, err)
	}
}

// capped is an engine that refuses create requests of more than max
// events with tb.ErrTooMuchData, as a --development server refuses large
// ones, and records the largest it took.
type capped struct {
	tb.Client
	max     int
	mu      sync.Mutex
	largest int
}

func (c *capped) CreateAccounts(as []tb.Account) ([]tb.CreateAccountResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(as) > c.max {
		return nil, tb.ErrTooMuchData
	}
	c.largest = max(c.largest, len(as))
	return c.Client.CreateAccounts(as)
}

// A request larger than the holder's cluster takes is refused whole
// (ErrTooMany), and the forwarded Client sends it again in parts the
// cluster takes, as it does on a cluster of its own; one of more than
// 8189 events is refused, nothing applied.
func TestForwardedTooLarge(t *testing.T) {
	ctx := t.Context()
	engine := &capped{Client: embedded.New(), max: 50}
	holder := ledger.New(engine)
	remote := ledger.NewForwarded(holder.Forward)
	r := ledger.Resource{Name: "api", Ledger: 1, Kind: ledger.KindRequests, Window: time.Hour, DefaultLimit: 2}
	if err := remote.CreateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	users := make([]ledger.UserLimit, 300)
	for i := range users {
		users[i] = ledger.UserLimit{Key: fmt.Sprint("user-", i), Limit: 2}
	}
	if err := remote.Provision(ctx, r, users...); err != nil {
		t.Fatalf("Provision(300 users) through a holder whose cluster takes 50 at once = %v", err)
	}
	if engine.largest > 50 {
		t.Errorf("the holder's cluster took a request of %d accounts, more than 50", engine.largest)
	}
	if got, err := holder.Users(ctx, r); err != nil || len(got) != 300 {
		t.Errorf("the holder's Users = %d users, %v; want 300", len(got), err)
	}
	_, err := holder.Forward(ctx, ledger.OpCreateTransfers, make([]byte, 128*(ledger.BatchMax+1)))
	if !errors.Is(err, ledger.ErrTooMany) {
		t.Errorf("Forward(%d transfers) = %v, want ErrTooMany", ledger.BatchMax+1, err)
	}
}
