package reserve

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
)

func TestReserveParsing(t *testing.T) {
	cmdtest.CheckParse(t, NewCmdReserve, []cmdtest.ParseCase[reserveOptions]{
		{Args: []string{"llm", "alice", "2000"}, Want: reserveOptions{Resource: "llm", User: "alice", Amount: 2000}},
		{Args: []string{"llm", "alice"}, Want: reserveOptions{Resource: "llm", User: "alice", Amount: 1}},
		{Args: []string{"usd", "alice", "500", "--payee", "shop", "--timeout", "10m", "--id", "abc"},
			Want: reserveOptions{Resource: "usd", User: "alice", Amount: 500, Payee: "shop", Timeout: 10 * time.Minute, ID: cmdtest.MustID(t, "abc")}},
		{Args: []string{"usd", "alice", "5", "--payee", "alice"}, Err: "cannot pay itself"},
		{Args: []string{"usd", "alice", "5", "--timeout", "10m"}, Err: "needs --payee"},
		{Args: []string{"usd", "alice", "5", "--payee", "shop", "--timeout", "1.5s"}, Err: "--timeout"},
		{Args: []string{"llm", "alice", "0"}, Err: `AMOUNT "0"`},
		{Args: []string{"llm"}, Err: "accepts between 2 and 3 arg(s)"},
	})
}

func TestEndParsing(t *testing.T) {
	cmdtest.CheckParse(t, NewCmdCommit, []cmdtest.ParseCase[endOptions]{
		{Args: []string{"01a2"}, Want: endOptions{Reservation: cmdtest.MustID(t, "01a2")}},
		{Args: []string{"01a2", "300"}, Want: endOptions{Reservation: cmdtest.MustID(t, "01a2"), Amount: 300}},
		{Args: []string{"xyz"}, Err: "RESERVATION"},
		{Args: []string{"01a2", "0"}, Err: `AMOUNT "0"`},
	})
	cmdtest.CheckParse(t, NewCmdCancel, []cmdtest.ParseCase[endOptions]{
		{Args: []string{"01a2"}, Want: endOptions{Reservation: cmdtest.MustID(t, "01a2")}},
		{Args: []string{"01a2", "3"}, Err: "accepts 1 arg(s)"},
	})
}
