package ledger_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// devServer refuses requests as a --development server does: creates of
// more than 253 events and lookups of more than 2031 IDs are too much data.
type devServer struct {
	tb.Client
	mu                   sync.Mutex
	maxCreate, maxLookup int // the largest requests it took
}

const devCreates, devLookups = 253, 2031

func (d *devServer) took(n, limit int, largest *int) error {
	if n > limit {
		return tb.ErrTooMuchData
	}
	d.mu.Lock()
	*largest = max(*largest, n)
	d.mu.Unlock()
	return nil
}

func (d *devServer) CreateAccounts(as []tb.Account) ([]tb.CreateAccountResult, error) {
	if err := d.took(len(as), devCreates, &d.maxCreate); err != nil {
		return nil, err
	}
	return d.Client.CreateAccounts(as)
}

func (d *devServer) CreateTransfers(ts []tb.Transfer) ([]tb.CreateTransferResult, error) {
	if err := d.took(len(ts), devCreates, &d.maxCreate); err != nil {
		return nil, err
	}
	return d.Client.CreateTransfers(ts)
}

func (d *devServer) LookupAccounts(ids []tb.Uint128) ([]tb.Account, error) {
	if err := d.took(len(ids), devLookups, &d.maxLookup); err != nil {
		return nil, err
	}
	return d.Client.LookupAccounts(ids)
}

// Against a server that takes smaller requests, a Client learns the largest
// create it takes (not a power-of-two fraction of it), and lookups keep
// their own, larger, size.
func TestClientLearnsRequestSizesPerOperation(t *testing.T) {
	srv := &devServer{Client: embedded.New()}
	c := ledger.New(srv)
	r := ledger.Resource{Name: "dev", Ledger: 7, Kind: ledger.KindRequests, Window: time.Minute, DefaultLimit: 5}
	if err := c.CreateResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	users := make([]ledger.UserLimit, 5000)
	for i := range users {
		users[i] = ledger.UserLimit{Key: fmt.Sprintf("user-%d", i), Limit: uint64(1 + i%7)}
	}
	if err := c.Provision(ctx, r, users...); err != nil {
		t.Fatal(err)
	}
	if err := c.Provision(ctx, r, users...); err != nil { // again: everything exists
		t.Fatal(err)
	}
	for _, i := range []int{0, 2500, 4999} {
		if u := inspect(t, c, r, users[i].Key); u.Limit != users[i].Limit {
			t.Fatalf("%s: limit %d, want %d", users[i].Key, u.Limit, users[i].Limit)
		}
	}
	if srv.maxCreate != devCreates {
		t.Errorf("largest create sent: %d events, want the server's %d", srv.maxCreate, devCreates)
	}
	if srv.maxLookup <= devCreates {
		t.Errorf("largest lookup sent: %d IDs: held down by the create size", srv.maxLookup)
	}
}
