package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv/launch"
)

// serverEnv is what the tigerbeetle commands share: where the server lives,
// the global flags they use, and where they print.
type serverEnv struct {
	Printer func() *printer
	ErrOut  io.Writer

	Dir       string        // --dir; "": next to the default data file
	ClusterID uint64        // --cluster-id
	Timeout   time.Duration // --timeout: how long status waits for an answer
}

// set takes the global flags, once cobra has parsed them.
func (e *serverEnv) set(g *globalOptions) { e.ClusterID, e.Timeout = g.clusterID, g.timeout }

// launchSpec is what up and serve start: the flags --port, --replicas,
// --binary and --development.
type launchSpec struct {
	Port        int
	Replicas    int
	Binary      string
	Development bool
}

func (l *launchSpec) bind(fs *pflag.FlagSet, long bool) {
	port, replicas, binary, development := "the loopback port to listen on (0: any free port)", "the number of replicas",
		"the tigerbeetle binary", "run with --development"
	if long {
		port = "the loopback port to listen on; replica i listens on port+i (0: any free ports)"
		replicas = "the number of replicas: 3 makes a cluster that survives one replica down"
		binary = "the tigerbeetle binary (default: $TIGERBEETLE_BIN, else tigerbeetle on PATH)"
		development = "run with --development: small caches, no Direct I/O needed, requests capped at 32 KiB (fine for trying tblimit, wrong for benchmarks)"
	}
	fs.IntVar(&l.Port, "port", 3000, port)
	fs.IntVar(&l.Replicas, "replicas", 1, replicas)
	fs.StringVar(&l.Binary, "binary", "", binary)
	fs.BoolVar(&l.Development, "development", true, development)
}

// check validates --port and --replicas.
func (l *launchSpec) check() error {
	if l.Replicas < 1 || l.Replicas > launch.MaxReplicas {
		return usagef("--replicas %d: want 1 to %d", l.Replicas, launch.MaxReplicas)
	}
	if l.Port < 0 || l.Port+l.Replicas-1 > 65535 {
		return usagef("--port %d: want 0 to %d", l.Port, 65536-l.Replicas)
	}
	return nil
}

const (
	stateFile = "server.json"
	logFile   = "tigerbeetle.log"

	// upWait bounds how long up waits for the supervisor: its start-up is bounded by
	// launch.DefaultReadyTimeout.
	upWait = launch.DefaultReadyTimeout + 10*time.Second
)

// serverJSON is the state of the local server or cluster: tigerbeetle up / status / down,
// and the state file the supervisor writes. Running without Answering is a cluster whose
// processes are alive but that did not answer in time (busy, all its client sessions in
// use, or too few replicas up).
type serverJSON struct {
	Running     bool          `json:"running"`              // a process the state file records is alive
	Answering   bool          `json:"answering"`            // and the cluster answered within --timeout
	PID         int           `json:"pid,omitempty"`        // the supervising tblimit process
	ServerPID   int           `json:"server_pid,omitempty"` // replica 0's
	Addresses   []string      `json:"addresses"`
	ClusterID   uint64        `json:"cluster_id"`
	Dir         string        `json:"dir"`
	DataFile    string        `json:"data_file,omitempty"` // replica 0's
	LogFile     string        `json:"log_file,omitempty"`
	Development bool          `json:"development"`
	Started     string        `json:"started,omitempty"`
	Replicas    []replicaJSON `json:"replicas"`

	pingErr error // why it is not answering, for the text output
}

// replicaJSON is one replica of the local cluster.
type replicaJSON struct {
	Replica  int    `json:"replica"`
	PID      int    `json:"pid"`
	Address  string `json:"address"`
	DataFile string `json:"data_file"`
	Running  bool   `json:"running"`
}

// down returns the replicas that are not running.
func (st serverJSON) down() []int {
	var down []int
	for _, r := range st.Replicas {
		if !r.Running {
			down = append(down, r.Replica)
		}
	}
	return down
}

func newCmdTigerBeetle(f *factory) *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "tigerbeetle",
		Short: "Run a local TigerBeetle server or cluster in the background: up, down, status",
		Long: `Run a local TigerBeetle server, or a cluster of several replicas, in the
background, with its data in a per-user directory, so that tblimit can run
against a real server:

  tblimit tigerbeetle up                      # formats the data file once, starts the server
  export TBLIMIT_ADDRESSES=127.0.0.1:3000     # what up prints
  tblimit resources list
  tblimit tigerbeetle down

To try failover by hand, start three replicas, stop or kill one, and bring it
back with up (it restarts on its data file and rejoins the cluster):

  tblimit tigerbeetle up --replicas 3         # ports 3000, 3001, 3002
  tblimit tigerbeetle down --replica 0 --kill # SIGKILL replica 0; 2 of 3 still answer
  tblimit tigerbeetle status                  # every replica, and whether the cluster answers
  tblimit tigerbeetle up                      # restarts replica 0
  tblimit tigerbeetle down                    # stops them all

The tigerbeetle binary is --binary, else $TIGERBEETLE_BIN, else tigerbeetle on
PATH; scripts/install-tigerbeetle.sh installs the release that matches
tblimit's client. A data file takes about 1.1 GB of disk, a replica about
1.5 GB of memory (less with --development, the default).`,
	})
	var dir string
	cmd.PersistentFlags().StringVar(&dir, "dir", "", "the server's directory: data files, log and state (default: the tigerbeetle directory next to the default --data)")
	env := func() serverEnv {
		e := serverEnv{Printer: f.printer, ErrOut: f.errOut, Dir: dir}
		e.set(&f.global)
		return e
	}
	cmd.AddCommand(newCmdServerUp(env, nil), newCmdServerDown(env, nil), newCmdServerStatus(env, nil), newCmdServerServe(env, nil))
	return cmd
}

// directory is the server's directory, absolute.
func (e *serverEnv) directory() (string, error) {
	if e.Dir != "" {
		return filepath.Abs(e.Dir)
	}
	home, err := dataHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "tigerbeetle"), nil
}

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

type serveOptions struct {
	serverEnv
	launchSpec
	ReadyFD int // where to report readiness, as one JSON line; 0: nowhere
}

func newCmdServerServe(env func() serverEnv, runF func(context.Context, *serveOptions) error) *cobra.Command {
	opts := &serveOptions{}
	cmd := &cobra.Command{
		Use:    "serve",
		Short:  "Run the server or cluster in the foreground and supervise it (what up starts)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.check(); err != nil {
				return err
			}
			opts.serverEnv = env()
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return serverServeRun(cmd.Context(), opts)
		},
	}
	opts.bind(cmd.Flags(), false)
	cmd.Flags().IntVar(&opts.ReadyFD, "ready-fd", 0, "a file descriptor to report readiness on, as one JSON line")
	return cmd
}

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
				return usagef("--purge stops everything: it goes with neither --replica nor --kill")
			}
			if opts.Replica < -1 || opts.Replica >= launch.MaxReplicas {
				return usagef("--replica %d: want 0 to %d", opts.Replica, launch.MaxReplicas-1)
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
	if err := p.emit(st, func() { opts.printStatus(p, st) }); err != nil {
		return err
	}
	if !st.Running || !st.Answering {
		return &silentError{code: ExitError}
	}
	return nil
}

func (e *serverEnv) printStatus(p *printer, st serverJSON) {
	if !st.Running {
		p.printf("tigerbeetle is not running (directory %s)\n", st.Dir)
		return
	}
	what := "tigerbeetle is"
	if len(st.Replicas) > 1 {
		what = fmt.Sprintf("a tigerbeetle cluster of %d replicas is", len(st.Replicas))
	}
	switch {
	case !st.Answering:
		p.printf("%s running but not answering at %s (pid %d, supervisor pid %d): %s\n",
			what, strings.Join(st.Addresses, ","), st.ServerPID, st.PID, e.why(st))
		p.printf("it may be busy, have all its client sessions in use, or too few replicas up; its log is %s; stop it with: %s\n", st.LogFile, e.downCommand(st))
	default:
		p.printf("%s running at %s (cluster %d, pid %d), data in %s, log in %s\n",
			what, strings.Join(st.Addresses, ","), st.ClusterID, st.ServerPID, st.DataFile, st.LogFile)
		p.printf("use it with: export TBLIMIT_ADDRESSES=%s TBLIMIT_CLUSTER_ID=%d\n", strings.Join(st.Addresses, ","), st.ClusterID)
	}
	if len(st.Replicas) < 2 {
		return
	}
	for _, r := range st.Replicas {
		state := "running"
		if !r.Running {
			state = "down (tblimit tigerbeetle up restarts it)"
		}
		p.printf("  replica %d at %s: %s (pid %d), data in %s\n", r.Replica, r.Address, state, r.PID, r.DataFile)
	}
}

// readState reads the state file the supervisor wrote; ok is false if there is none. A
// state written before clusters (no replicas) describes replica 0 by its server fields.
func readState(dir string) (serverJSON, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return serverJSON{Dir: dir}, false, nil
	}
	if err != nil {
		return serverJSON{}, false, err
	}
	var st serverJSON
	if err := json.Unmarshal(b, &st); err != nil {
		return serverJSON{}, false, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	if len(st.Replicas) == 0 && st.ServerPID != 0 {
		r := replicaJSON{PID: st.ServerPID, DataFile: st.DataFile}
		if len(st.Addresses) > 0 {
			r.Address = st.Addresses[0]
		}
		st.Replicas = []replicaJSON{r}
	}
	return st, true, nil
}

// saveState replaces the state file at once.
func saveState(dir string, st serverJSON) error {
	state := filepath.Join(dir, stateFile)
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(state+".tmp", append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(state+".tmp", state)
}

// liveness reads the state and checks which of its processes are alive, without asking the
// cluster anything: Running while the supervisor or a replica is.
func (e *serverEnv) liveness() (serverJSON, bool, error) {
	dir, err := e.directory()
	if err != nil {
		return serverJSON{}, false, err
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
func (e *serverEnv) status(ctx context.Context) (serverJSON, error) {
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
func (e *serverEnv) why(st serverJSON) string {
	switch {
	case st.pingErr == nil:
		return "no answer"
	case errors.Is(st.pingErr, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %s (--timeout)", e.Timeout)
	}
	return st.pingErr.Error()
}

// downCommand is the command that stops the server st describes.
func (e *serverEnv) downCommand(st serverJSON) string {
	if e.Dir == "" {
		return "tblimit tigerbeetle down"
	}
	return "tblimit tigerbeetle down --dir " + strconv.Quote(st.Dir)
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
		if len(st.down()) > 0 && ours(st.PID, st.Dir) {
			return o.restart(ctx, st)
		}
		if !st.Answering {
			// Starting another would fail on its ports, and forgetting this one would leave
			// down unable to stop it.
			return fmt.Errorf("tigerbeetle is already running in %s but not answering at %s (pid %d, supervisor pid %d): %s; "+
				"not starting a second one: stop it first with: %s",
				st.Dir, strings.Join(st.Addresses, ","), st.ServerPID, st.PID, o.why(st), o.downCommand(st))
		}
		return p.emit(st, func() {
			p.printf("already running\n")
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
	return p.emit(st, func() {
		p.printf("started tigerbeetle in the background\n")
		o.printStatus(p, st)
	})
}

// startSupervisor starts `tblimit tigerbeetle serve` in the background, in a session of its
// own, and returns the state it reports once the server answers.
func (o *upOptions) startSupervisor(ctx context.Context, dir, bin string) (serverJSON, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return serverJSON{}, err
	}
	_ = os.Remove(filepath.Join(dir, stateFile)) // a stale one: its processes are gone
	logPath := filepath.Join(dir, logFile)
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return serverJSON{}, err
	}
	defer log.Close()
	exe, err := os.Executable()
	if err != nil {
		return serverJSON{}, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return serverJSON{}, err
	}
	defer r.Close()
	cmd := exec.Command(exe, "tigerbeetle", "serve", "--dir", dir, "--port", strconv.Itoa(o.Port),
		"--replicas", strconv.Itoa(o.Replicas), "--binary", bin, "--cluster-id", strconv.FormatUint(o.ClusterID, 10),
		"--development="+strconv.FormatBool(o.Development), "--ready-fd", "3")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this process and its terminal
	if err := cmd.Start(); err != nil {
		w.Close()
		return serverJSON{}, fmt.Errorf("starting the supervisor %s: %w", exe, err)
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
		return serverJSON{}, ctx.Err()
	case <-timeout.C:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return serverJSON{}, fmt.Errorf("tigerbeetle did not start within %s; see %s", upWait, logPath)
	}
	if a.err != nil || strings.TrimSpace(a.line) == "" {
		<-exited
		return serverJSON{}, fmt.Errorf("the server supervisor exited before the server was ready; see %s:\n%s", logPath, tail(logPath, 2000))
	}
	var res struct {
		serverJSON
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.line), &res); err != nil {
		return serverJSON{}, fmt.Errorf("the server supervisor said %q: %w", a.line, err)
	}
	if res.Error != "" {
		return serverJSON{}, errors.New(res.Error)
	}
	return res.serverJSON, nil
}

// restart asks the supervisor of a running cluster to restart its replicas that are down
// (SIGHUP), and waits until it has recorded how that went.
func (e *serverEnv) restart(ctx context.Context, st serverJSON) error {
	down := st.down()
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
			if len(now.down()) > 0 || !now.Answering {
				return fmt.Errorf("replica(s) %v did not come back (the cluster answers: %v); see %s", now.down(), now.Answering, now.LogFile)
			}
			p := e.Printer()
			return p.emit(now, func() {
				p.printf("restarted replica(s) %s\n", joinInts(down))
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
func restarted(before, now serverJSON) bool {
	for _, i := range before.down() {
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
		_ = os.Remove(filepath.Join(dir, stateFile))
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
	return p.emit(st, func() {
		switch {
		case stopped && len(st.Replicas) > 1:
			p.printf("stopped the tigerbeetle cluster of %d replicas\n", len(st.Replicas))
		case stopped:
			p.printf("stopped tigerbeetle (pid %d)\n", st.ServerPID)
		default:
			p.printf("tigerbeetle was not running\n")
		}
		if purged != "" {
			p.printf("deleted%s\n", purged)
		}
	})
}

// downReplicas stops or kills one replica (--replica) or kills all (--kill), leaving the
// supervisor and the state so that up restarts them.
func (o *downOptions) downReplicas(ctx context.Context, st serverJSON, ok bool) error {
	if !ok || !st.Running {
		return fmt.Errorf("tigerbeetle is not running in %s", st.Dir)
	}
	targets := slices.Clone(st.Replicas)
	if o.Replica >= 0 {
		if o.Replica >= len(st.Replicas) {
			return usagef("--replica %d: the cluster has %d replica(s)", o.Replica, len(st.Replicas))
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
	return p.emit(now, func() {
		if len(done) == 0 {
			p.printf("no replica to stop: already down\n")
		} else {
			p.printf("%s %s\n", verb, strings.Join(done, ", "))
		}
		if len(now.Replicas) > 1 && ours(now.PID, now.Dir) {
			p.printf("tblimit tigerbeetle up restarts it on its data file\n")
		}
	})
}

// alive reports whether a process with this pid exists (and is not a zombie
// of this process).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ours reports whether pid is alive and is a process of the server in dir.
// Where /proc shows command lines (Linux), both the supervisor's (tblimit
// tigerbeetle serve --dir DIR) and the replicas' (tigerbeetle start
// DIR/...tigerbeetle) name dir, which a process that took over the pid of a
// dead one (after a crash or a reboot) does not; elsewhere the pid is trusted.
func ours(pid int, dir string) bool {
	if !alive(pid) {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || dir == "" {
		return true // no /proc, or not allowed to look
	}
	return bytes.Contains(cmdline, []byte(dir)) // a zombie's is empty
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
