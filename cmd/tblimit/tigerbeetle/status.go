package tigerbeetle

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

type statusOptions struct {
	serverEnv
}

func newCmdServerStatus(env func() serverEnv, runF func(context.Context, *statusOptions) error) *cobra.Command {
	opts := &statusOptions{}
	return &cobra.Command{
		Use:   "status",
		Short: "Tell whether the local tigerbeetle server or cluster runs and answers, replica by replica (exit 1 if it does not answer)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.serverEnv = env()
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return serverStatusRun(cmd.Context(), opts)
		},
	}
}

func serverStatusRun(ctx context.Context, opts *statusOptions) error {
	st, err := opts.status(ctx)
	if err != nil {
		return err
	}
	p := opts.Printer()
	if err := p.Emit(st, func() { opts.printStatus(p, st) }); err != nil {
		return err
	}
	if !st.Running || !st.Answering {
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	return nil
}

func (e *serverEnv) printStatus(p *cmdutil.Printer, st ServerJSON) {
	if !st.Running {
		p.Printf("tigerbeetle is not running (directory %s)\n", st.Dir)
		return
	}
	what := "tigerbeetle is"
	if len(st.Replicas) > 1 {
		what = fmt.Sprintf("a tigerbeetle cluster of %d replicas is", len(st.Replicas))
	}
	switch {
	case !st.Answering:
		p.Printf("%s running but not answering at %s (pid %d, supervisor pid %d): %s\n",
			what, strings.Join(st.Addresses, ","), st.ServerPID, st.PID, e.why(st))
		p.Printf("it may be busy, have all its client sessions in use, or too few replicas up; its log is %s; stop it with: %s\n", st.LogFile, e.downCommand(st))
	default:
		p.Printf("%s running at %s (cluster %d, pid %d), data in %s, log in %s\n",
			what, strings.Join(st.Addresses, ","), st.ClusterID, st.ServerPID, st.DataFile, st.LogFile)
		p.Printf("use it with: export TBLIMIT_ADDRESSES=%s TBLIMIT_CLUSTER_ID=%d\n", strings.Join(st.Addresses, ","), st.ClusterID)
		if st.ClientConnections > 0 {
			p.Printf("each replica accepts %d client connections (every process and tblimit command holds one while it runs; "+
				"--limit-pipeline-requests raises it), the cluster 64 sessions\n", st.ClientConnections)
		}
	}
	if len(st.Replicas) < 2 {
		return
	}
	for _, r := range st.Replicas {
		state := "running"
		if !r.Running {
			state = "down (tblimit tigerbeetle up restarts it)"
		}
		p.Printf("  replica %d at %s: %s (pid %d), data in %s\n", r.Replica, r.Address, state, r.PID, r.DataFile)
	}
}

// liveness reads the state and checks which of its processes are alive, without asking the
// cluster anything: Running while the supervisor or a replica is.
func (e *serverEnv) liveness() (ServerJSON, bool, error) {
	dir, err := e.directory()
	if err != nil {
		return ServerJSON{}, false, err
	}
	st, ok, err := readState(dir)
	if err != nil || !ok {
		return st, ok, err
	}
	st.Running = ours(st.PID, st.Dir)
	for i := range st.Replicas {
		st.Replicas[i].Running = ours(st.Replicas[i].PID, st.Dir)
		st.Running = st.Running || st.Replicas[i].Running
	}
	return st, true, nil
}

// status is liveness and a ping: Answering if the cluster answers within --timeout. Only a
// state without Running is stale.
func (e *serverEnv) status(ctx context.Context) (ServerJSON, error) {
	st, ok, err := e.liveness()
	st.Answering = false
	if err != nil || !ok || !st.Running {
		return st, err
	}
	c, err := ledger.Dial(st.ClusterID, st.Addresses, ledger.WithTimeout(e.Timeout))
	if err != nil {
		st.pingErr = err
		return st, nil
	}
	defer c.Close()
	st.pingErr = c.Ping(ctx)
	st.Answering = st.pingErr == nil
	return st, nil
}

// why says why a running server is not answering.
func (e *serverEnv) why(st ServerJSON) string {
	switch {
	case st.pingErr == nil:
		return "no answer"
	case errors.Is(st.pingErr, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %s (--timeout)", e.Timeout)
	}
	return st.pingErr.Error()
}

// downCommand is the command that stops the server st describes.
func (e *serverEnv) downCommand(st ServerJSON) string {
	if e.Dir == "" {
		return "tblimit tigerbeetle down"
	}
	return "tblimit tigerbeetle down --dir " + strconv.Quote(st.Dir)
}
