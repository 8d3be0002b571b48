package tigerbeetle

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/internal/launch"
)

type upOptions struct {
	serverEnv
	launchSpec
	ReplicasGiven bool // --replicas was on the command line: a running cluster of another size is an error
}

func newCmdServerUp(env func() serverEnv, runF func(context.Context, *upOptions) error) *cobra.Command {
	opts := &upOptions{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Format (once) and start a local tigerbeetle server or cluster in the background; restart replicas that are down",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.check(); err != nil {
				return err
			}
			opts.serverEnv, opts.ReplicasGiven = env(), cmd.Flags().Changed("replicas")
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return serverUpRun(cmd.Context(), opts)
		},
	}
	opts.bind(cmd.Flags(), true)
	return cmd
}

// up starts a server or cluster, or restarts the replicas of a running cluster that are
// down. replicasGiven says whether --replicas was on the command line: a running cluster of
// another size is then an error.
func serverUpRun(ctx context.Context, o *upOptions) error {
	dir, err := o.directory()
	if err != nil {
		return err
	}
	p := o.Printer()
	if st, err := o.status(ctx); err == nil && st.Running {
		if o.ReplicasGiven && len(st.Replicas) != o.Replicas {
			return fmt.Errorf("tigerbeetle is already running in %s with %d replica(s), not %d: stop it first with: %s",
				st.Dir, len(st.Replicas), o.Replicas, o.downCommand(st))
		}
		if len(st.Down()) > 0 && ours(st.PID, st.Dir) {
			return o.restart(ctx, st)
		}
		if !st.Answering {
			// Starting another would fail on its ports, and forgetting this one would leave
			// down unable to stop it.
			return fmt.Errorf("tigerbeetle is already running in %s but not answering at %s (pid %d, supervisor pid %d): %s; "+
				"not starting a second one: stop it first with: %s",
				st.Dir, strings.Join(st.Addresses, ","), st.ServerPID, st.PID, o.why(st), o.downCommand(st))
		}
		return p.Emit(st, func() {
			p.Printf("already running\n")
			o.printStatus(p, st)
		})
	}
	bin, err := launch.FindBinary(o.Binary)
	if errors.Is(err, launch.ErrNoBinary) {
		return errors.New("no tigerbeetle binary found (tried --binary, $TIGERBEETLE_BIN and tigerbeetle on PATH): " +
			"install one with scripts/install-tigerbeetle.sh, then export TIGERBEETLE_BIN=<dir>/tigerbeetle as it says")
	}
	if err != nil {
		return err
	}
	st, err := o.startSupervisor(ctx, dir, bin)
	if err != nil {
		return err
	}
	return p.Emit(st, func() {
		p.Printf("started tigerbeetle in the background\n")
		o.printStatus(p, st)
	})
}

// startSupervisor starts `tblimit tigerbeetle serve` in the background, in a session of its
// own, and returns the state it reports once the server answers.
func (o *upOptions) startSupervisor(ctx context.Context, dir, bin string) (ServerJSON, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ServerJSON{}, err
	}
	_ = os.Remove(filepath.Join(dir, StateFile)) // a stale one: its processes are gone
	logPath := filepath.Join(dir, LogFile)
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return ServerJSON{}, err
	}
	defer log.Close()
	exe, err := os.Executable()
	if err != nil {
		return ServerJSON{}, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return ServerJSON{}, err
	}
	defer r.Close()
	cmd := exec.Command(exe, "tigerbeetle", "serve", "--dir", dir, "--port", strconv.Itoa(o.Port),
		"--replicas", strconv.Itoa(o.Replicas), "--binary", bin, "--cluster-id", strconv.FormatUint(o.ClusterID, 10),
		"--development="+strconv.FormatBool(o.Development), "--limit-pipeline-requests", strconv.Itoa(o.PipelineRequests), "--ready-fd", "3")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this process and its terminal
	if err := cmd.Start(); err != nil {
		w.Close()
		return ServerJSON{}, fmt.Errorf("starting the supervisor %s: %w", exe, err)
	}
	w.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // reaps it if it ends while this process runs

	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		got <- answer{line, err}
	}()
	timeout := time.NewTimer(upWait)
	defer timeout.Stop()
	var a answer
	select {
	case a = <-got:
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return ServerJSON{}, ctx.Err()
	case <-timeout.C:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return ServerJSON{}, fmt.Errorf("tigerbeetle did not start within %s; see %s", upWait, logPath)
	}
	if a.err != nil || strings.TrimSpace(a.line) == "" {
		<-exited
		return ServerJSON{}, fmt.Errorf("the server supervisor exited before the server was ready; see %s:\n%s", logPath, tail(logPath, 2000))
	}
	var res struct {
		ServerJSON
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.line), &res); err != nil {
		return ServerJSON{}, fmt.Errorf("the server supervisor said %q: %w", a.line, err)
	}
	if res.Error != "" {
		return ServerJSON{}, errors.New(res.Error)
	}
	return res.ServerJSON, nil
}

// restart asks the supervisor of a running cluster to restart its replicas that are down
// (SIGHUP), and waits until it has recorded how that went.
func (e *serverEnv) restart(ctx context.Context, st ServerJSON) error {
	down := st.Down()
	if err := syscall.Kill(st.PID, syscall.SIGHUP); err != nil {
		return fmt.Errorf("asking the supervisor (pid %d) to restart replica(s) %v: %w", st.PID, down, err)
	}
	deadline := time.Now().Add(upWait)
	for {
		now, ok, err := e.liveness()
		if err != nil {
			return err
		}
		if !ok || !ours(now.PID, now.Dir) {
			return fmt.Errorf("the supervisor (pid %d) exited while restarting replica(s) %v; see %s", st.PID, down, st.LogFile)
		}
		if restarted(st, now) {
			if len(now.Down()) > 0 || !now.Answering {
				return fmt.Errorf("replica(s) %v did not come back (the cluster answers: %v); see %s", now.Down(), now.Answering, now.LogFile)
			}
			p := e.Printer()
			return p.Emit(now, func() {
				p.Printf("restarted replica(s) %s\n", joinInts(down))
				e.printStatus(p, now)
			})
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica(s) %v were not restarted within %s; see %s", down, upWait, st.LogFile)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// restarted reports whether the supervisor has recorded new processes for every replica
// that was down in before.
func restarted(before, now ServerJSON) bool {
	for _, i := range before.Down() {
		if i >= len(now.Replicas) || now.Replicas[i].PID == before.Replicas[i].PID {
			return false
		}
	}
	return true
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// tail returns the end of a file, for error messages.
func tail(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}
