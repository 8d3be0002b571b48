package api_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/service/api"
)

// A server of the API on the embedded engine, and its generated Go client:
// a payment sent twice under one request_id is made once.
func Example() {
	ctx := context.Background()
	c := ledger.New(embedded.New())
	defer c.Close()
	usd := ledger.Resource{Name: "usd-day", Ledger: 3, Kind: ledger.KindMoney, Currency: 840, Window: 24 * time.Hour, DefaultLimit: 100_00}
	if err := c.CreateResource(ctx, usd); err != nil {
		panic(err)
	}
	if err := c.Provision(ctx, usd, ledger.UserLimit{Key: "alice", Limit: 100_00}, ledger.UserLimit{Key: "shop", Limit: 100_00}); err != nil {
		panic(err)
	}

	srv := grpc.NewServer() // tblimit serve --api serves it on its listeners
	api.New(c).Register(srv, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(ln)
	defer srv.Stop()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	lim := tblimitv1.NewLimitServiceClient(conn)
	if _, err := lim.Fund(ctx, &tblimitv1.FundRequest{Resource: "usd-day", User: "alice", Amount: 50_00, RequestId: "top-up-1"}); err != nil {
		panic(err)
	}
	for range 2 { // the second time, as after a lost answer
		resp, err := lim.Pay(ctx, &tblimitv1.PayRequest{Resource: "usd-day", From: "alice", To: "shop", Amount: 12_50, RequestId: "order-1234"})
		if err != nil {
			panic(err)
		}
		d := resp.GetDecision()
		fmt.Println("paid:", d.GetAllowed(), "limit left:", d.GetRemaining())
	}
	funds, err := c.Funds(ctx, 840, "alice")
	fmt.Println("alice holds", funds, err)
	// Output:
	// paid: true limit left: 8750
	// paid: true limit left: 8750
	// alice holds 3750 <nil>
}
