package usage

import (
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
)

func TestUsageParsing(t *testing.T) {
	cmdtest.CheckParse(t, NewCmdUsage, []cmdtest.ParseCase[usageOptions]{
		{Args: []string{"api", "alice"}, Want: usageOptions{Resource: "api", User: "alice", Max: 100}},
		{Args: []string{"api", "alice", "--max", "0"}, Want: usageOptions{Resource: "api", User: "alice"}},
		{Args: []string{"api", "alice", "--max", "-1"}, Err: "--max -1: must not be negative"},
		{Args: []string{"api"}, Err: "accepts 2 arg(s)"},
	})
}
