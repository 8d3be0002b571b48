package tigerbeetle

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/internal/launch"
)

type downOptions struct {
	serverEnv
	Purge   bool
	Replica int // -1: all
	Kill    bool
}

func newCmdServerDown(env func() serverEnv, runF func(context.Context, *downOptions) error) *cobra.Command {
	opts := &downOptions{}
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local tigerbeetle server or cluster, or one replica (data is kept unless --purge)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Purge && (opts.Kill || opts.Replica >= 0) {
				return cmdutil.Usagef("--purge stops everything: it goes with neither --replica nor --kill")
			}
			if opts.Replica < -1 || opts.Replica >= launch.MaxReplicas {
				return cmdutil.Usagef("--replica %d: want 0 to %d", opts.Replica, launch.MaxReplicas-1)
			}
			opts.serverEnv = env()
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return serverDownRun(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&opts.Purge, "purge", false, "also delete the data files")
	fs.IntVar(&opts.Replica, "replica", -1, "stop only this replica (up restarts it); the others keep running")
	fs.BoolVar(&opts.Kill, "kill", false, "SIGKILL the replicas (all, or --replica) as a crash would, instead of stopping them; up restarts them on their data files")
	return cmd
}

func serverDownRun(ctx context.Context, o *downOptions) error {
	dir, err := o.directory()
	if err != nil {
		return err
	}
	st, ok, err := o.liveness()
	if err != nil {
		return err
	}
	if o.Replica >= 0 || o.Kill {
		return o.downReplicas(ctx, st, ok)
	}
	p := o.Printer()
	stopped := false
	if ok {
		pids := []int{st.PID} // the supervisor stops its replicas; the loop catches orphans
		for _, r := range st.Replicas {
			pids = append(pids, r.PID)
		}
		for _, pid := range pids {
			if ours(pid, st.Dir) {
				stopped = true
				if err := stop(ctx, pid, syscall.SIGTERM); err != nil {
					return err
				}
			}
		}
		_ = os.Remove(filepath.Join(dir, StateFile))
	}
	purged := ""
	if o.Purge {
		files, _ := filepath.Glob(filepath.Join(dir, "*.tigerbeetle"))
		for _, f := range files {
			if err := os.Remove(f); err != nil {
				return err
			}
			purged += " " + f
		}
	}
	st.Running, st.Answering = false, false
	for i := range st.Replicas {
		st.Replicas[i].Running = false
	}
	return p.Emit(st, func() {
		switch {
		case stopped && len(st.Replicas) > 1:
			p.Printf("stopped the tigerbeetle cluster of %d replicas\n", len(st.Replicas))
		case stopped:
			p.Printf("stopped tigerbeetle (pid %d)\n", st.ServerPID)
		default:
			p.Printf("tigerbeetle was not running\n")
		}
		if purged != "" {
			p.Printf("deleted%s\n", purged)
		}
	})
}

// downReplicas stops or kills one replica (--replica) or kills all (--kill), leaving the
// supervisor and the state so that up restarts them.
func (o *downOptions) downReplicas(ctx context.Context, st ServerJSON, ok bool) error {
	if !ok || !st.Running {
		return fmt.Errorf("tigerbeetle is not running in %s", st.Dir)
	}
	targets := slices.Clone(st.Replicas)
	if o.Replica >= 0 {
		if o.Replica >= len(st.Replicas) {
			return cmdutil.Usagef("--replica %d: the cluster has %d replica(s)", o.Replica, len(st.Replicas))
		}
		targets = targets[o.Replica : o.Replica+1]
	}
	sig, verb := syscall.SIGTERM, "stopped"
	if o.Kill {
		sig, verb = syscall.SIGKILL, "killed"
	}
	var done []string
	for _, r := range targets {
		if !r.Running {
			continue
		}
		if err := stop(ctx, r.PID, sig); err != nil {
			return err
		}
		done = append(done, fmt.Sprintf("replica %d (pid %d)", r.Replica, r.PID))
	}
	now, _, err := o.liveness()
	if err != nil {
		return err
	}
	p := o.Printer()
	return p.Emit(now, func() {
		if len(done) == 0 {
			p.Printf("no replica to stop: already down\n")
		} else {
			p.Printf("%s %s\n", verb, strings.Join(done, ", "))
		}
		if len(now.Replicas) > 1 && ours(now.PID, now.Dir) {
			p.Printf("tblimit tigerbeetle up restarts it on its data file\n")
		}
	})
}

// stop sends sig to pid and waits for it to go; after SIGTERM, SIGKILL if it
// does not.
func stop(ctx context.Context, pid int, sig syscall.Signal) error {
	_ = syscall.Kill(pid, sig)
	deadline := time.Now().Add(launch.DefaultStopTimeout + 5*time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("process %d did not stop after signal %d and was killed", pid, sig)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
