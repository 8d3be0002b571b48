package simnet_test

import (
	"fmt"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/ledger/simnet"
)

// A Client in front of the embedded engine costs what a client of a real
// server costs; use it where a tb.Client is wanted, such as ledger.New.
func Example() {
	e := embedded.New()
	defer e.Close()
	c := simnet.New(e, simnet.RealServer0179)
	defer c.Close()

	res, err := c.CreateAccounts([]tb.Account{{ID: tb.ToUint128(1), Ledger: 1, Code: 1}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res[0].Status)
	st := c.Stats()
	fmt.Println(st.Ops[simnet.CreateAccounts].Requests, "request, at least a round trip:", st.Busy >= simnet.RealServer0179.RoundTrip)
	// Output:
	// AccountCreated
	// 1 request, at least a round trip: true
}
