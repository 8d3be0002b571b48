package demo

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
)

func TestDemoParsing(t *testing.T) {
	cmdtest.CheckParse(t, NewCmdDemo, []cmdtest.ParseCase[demoOptions]{
		{Args: []string{}, Want: demoOptions{Window: 2 * time.Second}},
		{Args: []string{"--window", "1m"}, Want: demoOptions{Window: time.Minute}},
		{Args: []string{"--window", "1.5s"}, Err: "not a whole number of seconds"},
	})
}
