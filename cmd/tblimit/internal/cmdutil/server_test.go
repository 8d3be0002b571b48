package cmdutil

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
)

// deadlines is a LedgerService that answers every Submit with no results
// and records how long each call had left.
type deadlines struct {
	tblimitv1.UnimplementedLedgerServiceServer
	mu   sync.Mutex
	left []time.Duration // -1: no deadline
}

func (d *deadlines) Submit(ctx context.Context, _ *tblimitv1.SubmitRequest) (*tblimitv1.SubmitResponse, error) {
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.left = append(d.left, left)
	return &tblimitv1.SubmitResponse{}, nil
}

// Every call through --server carries the command's --timeout as its
// deadline, so that serve answers within it.
func TestServerCallsHaveTheTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &deadlines{}
	g := grpc.NewServer()
	tblimitv1.RegisterLedgerServiceServer(g, srv)
	go g.Serve(ln)
	defer g.Stop()

	opts := &GlobalOptions{Server: ln.Addr().String(), Timeout: time.Minute}
	c, done, err := opts.openServer()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if err := c.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.left) != 1 || srv.left[0] <= 0 || srv.left[0] > time.Minute {
		t.Errorf("serve saw calls with %v left, want one call with at most --timeout (1m)", srv.left)
	}
}
