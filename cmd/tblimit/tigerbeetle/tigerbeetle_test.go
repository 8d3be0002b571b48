package tigerbeetle

import (
	"context"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
)

func TestServerParsing(t *testing.T) {
	env := func(*cmdutil.Factory) func() serverEnv {
		return func() serverEnv { return serverEnv{Dir: "d", ClusterID: 7, Timeout: time.Second} }
	}
	up := func(f *cmdutil.Factory, runF func(context.Context, *upOptions) error) *cobra.Command {
		return newCmdServerUp(env(f), runF)
	}
	base := serverEnv{Dir: "d", ClusterID: 7, Timeout: time.Second}
	cmdtest.CheckParse(t, up, []cmdtest.ParseCase[upOptions]{
		{Args: []string{}, Want: upOptions{serverEnv: base, launchSpec: launchSpec{Port: 3000, Replicas: 1, Development: true}}},
		{
			Args: []string{"--replicas", "3", "--port", "0", "--binary", "/bin/tb", "--development=false"},
			Want: upOptions{serverEnv: base, launchSpec: launchSpec{Replicas: 3, Binary: "/bin/tb"}, ReplicasGiven: true},
		},
		{Args: []string{"--replicas", "0"}, Err: "--replicas 0: want 1 to 6"},
		{Args: []string{"--replicas", "3", "--port", "65534"}, Err: "--port 65534: want 0 to 65533"},
	})
	down := func(f *cmdutil.Factory, runF func(context.Context, *downOptions) error) *cobra.Command {
		return newCmdServerDown(env(f), runF)
	}
	cmdtest.CheckParse(t, down, []cmdtest.ParseCase[downOptions]{
		{Args: []string{}, Want: downOptions{serverEnv: base, Replica: -1}},
		{Args: []string{"--replica", "1", "--kill"}, Want: downOptions{serverEnv: base, Replica: 1, Kill: true}},
		{Args: []string{"--purge"}, Want: downOptions{serverEnv: base, Replica: -1, Purge: true}},
		{Args: []string{"--purge", "--kill"}, Err: "--purge stops everything"},
		{Args: []string{"--replica", "9"}, Err: "--replica 9"},
	})
	status := func(f *cmdutil.Factory, runF func(context.Context, *statusOptions) error) *cobra.Command {
		return newCmdServerStatus(env(f), runF)
	}
	cmdtest.CheckParse(t, status, []cmdtest.ParseCase[statusOptions]{
		{Args: []string{}, Want: statusOptions{serverEnv: base}},
		{Args: []string{"now"}, Err: `unknown command "now"`},
	})
}

// up refuses a --limit-pipeline-requests above what a replica takes.
func TestUpPipelineRequestsParsing(t *testing.T) {
	if _, err := cmdtest.ParseCmd(t, func(f *cmdutil.Factory, runF func(context.Context, *upOptions) error) *cobra.Command {
		return newCmdServerUp(func() serverEnv { return serverEnv{} }, runF)
	}, "--limit-pipeline-requests", "58"); !cmdutil.IsUsage(err) {
		t.Errorf("up --limit-pipeline-requests 58 = %v, want a usage error", err)
	}
}
