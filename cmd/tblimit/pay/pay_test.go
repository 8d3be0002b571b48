package pay

import (
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
)

func TestPayParsing(t *testing.T) {
	cmdtest.CheckParse(t, NewCmdPay, []cmdtest.ParseCase[payOptions]{
		{Args: []string{"usd", "alice", "shop", "600"}, Want: payOptions{Resource: "usd", From: "alice", To: "shop", Amount: 600}},
		{Args: []string{"usd", "alice", "shop", "1", "--id", "abc", "--ref", "9"}, Want: payOptions{Resource: "usd", From: "alice", To: "shop", Amount: 1, ID: cmdtest.MustID(t, "abc"), Ref: 9}},
		{Args: []string{"usd", "alice", "alice", "1"}, Err: "cannot pay itself"},
		{Args: []string{"usd", "alice", "shop"}, Err: "accepts 4 arg(s)"},
		{Args: []string{"usd", "alice", "shop", "0"}, Err: `AMOUNT "0"`},
		{Args: []string{"usd", "", "shop", "1"}, Err: "FROM: "},
		{Args: []string{"usd", "alice", "", "1"}, Err: "TO: "},
	})
}
