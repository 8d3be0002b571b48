package fund

import (
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
)

func TestFundParsing(t *testing.T) {
	cmdtest.CheckParse(t, NewCmdFund, []cmdtest.ParseCase[fundOptions]{
		{Args: []string{"usd", "alice", "500", "--id", "1f"}, Want: fundOptions{Resource: "usd", User: "alice", Amount: 500, ID: cmdtest.MustID(t, "1f")}},
		{Args: []string{"usd", "alice", "0"}, Err: `AMOUNT "0"`},
		{Args: []string{"usd", "alice", "5", "--id", "zz"}, Err: `--id "zz"`},
	})
	// Without --id, a new ID: the output names it for a retry.
	got, err := cmdtest.ParseCmd(t, NewCmdFund, "usd", "alice", "5")
	if err != nil || got.ID.IsZero() {
		t.Errorf("fund without --id: %+v, %v; want a new ID", got, err)
	}
}
