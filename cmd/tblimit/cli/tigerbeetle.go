package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv/launch"
)

// serverOptions are the flags of the tigerbeetle commands.
type serverOptions struct {
	g           *globalOptions
	dir         string
	port        int
	binary      string
	development bool
	purge       bool
	readyFD     int
}

const (
	stateFile = "server.json"
	logFile   = "tigerbeetle.log"
)

func newTigerBeetle(g *globalOptions) *cobra.Command {
	o := &serverOptions{g: g}
	cmd := group(&cobra.Command{
		Use:   "tigerbeetle",
		Short: "Run a local TigerBeetle server in the background: up, down, status",
		Long: `Run a local single-replica TigerBeetle server in the background, with its data
in a per-user directory, so that tblimit can run against a real server:

  tblimit tigerbeetle up                      # formats the data file once, starts the server
  export TBLIMIT_ADDRESSES=127.0.0.1:3000     # what up prints
  tblimit resources list
  tblimit tigerbeetle down

The tigerbeetle binary is --binary, else $TIGERBEETLE_BIN, else tigerbeetle on
PATH; scripts/install-tigerbeetle.sh installs the release that matches
tblimit's client. A data file takes about 1.1 GB of disk, the server about
1.5 GB of memory (less with --development, the default).`,
	})
	cmd.PersistentFlags().StringVar(&o.dir, "dir", "", "the server's directory: data file, log and state (default: the tigerbeetle directory next to the default --data)")
	cmd.AddCommand(newServerUp(o), newServerDown(o), newServerStatus(o), newServerServe(o))
	return cmd
}

func (o *serverOptions) directory() (string, error) {
	if o.dir != "" {
		return filepath.Abs(o.dir)
	}
	home, err := dataHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "tigerbeetle"), nil
}

func newServerUp(o *serverOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Format (once) and start a local tigerbeetle server in the background",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.port < 0 || o.port > 65535 {
				return usagef("--port %d: want 0 to 65535", o.port)
			}
			return o.up(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.port, "port", 3000, "the loopback port to listen on (0: any free port)")
	f.StringVar(&o.binary, "binary", "", "the tigerbeetle binary (default: $TIGERBEETLE_BIN, else tigerbeetle on PATH)")
	f.BoolVar(&o.development, "development", true, "run with --development: small caches, no Direct I/O needed, requests capped at 32 KiB (fine for trying tblimit, wrong for benchmarks)")
	return cmd
}

func newServerServe(o *serverOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "serve",
		Short:  "Run the server in the foreground and supervise it (what up starts)",
		Hidden: true,
		Args:   args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.serve(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.port, "port", 3000, "the loopback port to listen on (0: any free port)")
	f.StringVar(&o.binary, "binary", "", "the tigerbeetle binary")
	f.BoolVar(&o.development, "development", true, "run with --development")
	f.IntVar(&o.readyFD, "ready-fd", 0, "a file descriptor to report readiness on, as one JSON line")
	return cmd
}

func newServerDown(o *serverOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local tigerbeetle server (its data is kept unless --purge)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.down(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.purge, "purge", false, "also delete the server's data file")
	return cmd
}

func newServerStatus(o *serverOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Tell whether the local tigerbeetle server runs and answers (exit 1 if not)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := o.status(cmd.Context())
			if err != nil {
				return err
			}
			p := o.g.out()
			if err := p.emit(st, func() { o.printStatus(p, st) }); err != nil {
				return err
			}
			if !st.Running || !st.Answering {
				return &exitError{code: ExitError}
			}
			return nil
		},
	}
}

func (o *serverOptions) printStatus(p *printer, st serverJSON) {
	if !st.Running {
		p.printf("tigerbeetle is not running (directory %s)\n", st.Dir)
		return
	}
	if !st.Answering {
		p.printf("tigerbeetle is running but not answering at %s (pid %d, supervisor pid %d): %s\n",
			strings.Join(st.Addresses, ","), st.ServerPID, st.PID, o.why(st))
		p.printf("it may be busy or have all its client sessions in use; its log is %s; stop it with: %s\n", st.LogFile, o.downCommand(st))
		return
	}
	p.printf("tigerbeetle is running at %s (cluster %d, pid %d), data in %s, log in %s\n",
		strings.Join(st.Addresses, ","), st.ClusterID, st.ServerPID, st.DataFile, st.LogFile)
	p.printf("use it with: export TBLIMIT_ADDRESSES=%s TBLIMIT_CLUSTER_ID=%d\n", strings.Join(st.Addresses, ","), st.ClusterID)
}

// readState reads the state file the supervisor wrote; ok is false if there
// is none.
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
	return st, true, nil
}

// status reads the state and checks the server: Running while a process the
// state file records is alive, Answering if the server also answers a ping
// within --timeout. Only a state without Running is stale.
func (o *serverOptions) status(ctx context.Context) (serverJSON, error) {
	dir, err := o.directory()
	if err != nil {
		return serverJSON{}, err
	}
	st, ok, err := readState(dir)
	if err != nil || !ok {
		return st, err
	}
	st.Running = ours(st.PID, st.Dir) || ours(st.ServerPID, st.Dir)
	st.Answering = false
	if !st.Running {
		return st, nil
	}
	c, err := ledger.Dial(st.ClusterID, st.Addresses, ledger.WithTimeout(o.g.timeout))
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
func (o *serverOptions) why(st serverJSON) string {
	switch {
	case st.pingErr == nil:
		return "no answer"
	case errors.Is(st.pingErr, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %s (--timeout)", o.g.timeout)
	}
	return st.pingErr.Error()
}

// downCommand is the command that stops the server st describes.
func (o *serverOptions) downCommand(st serverJSON) string {
	if o.dir == "" {
		return "tblimit tigerbeetle down"
	}
	return "tblimit tigerbeetle down --dir " + strconv.Quote(st.Dir)
}

func (o *serverOptions) up(ctx context.Context) error {
	dir, err := o.directory()
	if err != nil {
		return err
	}
	p := o.g.out()
	if st, err := o.status(ctx); err == nil && st.Running {
		if !st.Answering {
			// Starting another would fail on its port, and forgetting this
			// one would leave down unable to stop it.
			return fmt.Errorf("tigerbeetle is already running in %s but not answering at %s (pid %d, supervisor pid %d): %s; "+
				"not starting a second one: stop it first with: %s",
				st.Dir, strings.Join(st.Addresses, ","), st.ServerPID, st.PID, o.why(st), o.downCommand(st))
		}
		return p.emit(st, func() {
			p.printf("already running\n")
			o.printStatus(p, st)
		})
	}
	bin, err := launch.FindBinary(o.binary)
	if errors.Is(err, launch.ErrNoBinary) {
		return errors.New("no tigerbeetle binary found (tried --binary, $TIGERBEETLE_BIN and tigerbeetle on PATH): " +
			"install one with scripts/install-tigerbeetle.sh, then export TIGERBEETLE_BIN=<dir>/tigerbeetle as it says")
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, stateFile)) // a stale one: its processes are gone
	logPath := filepath.Join(dir, logFile)
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe, "tigerbeetle", "serve", "--dir", dir, "--port", strconv.Itoa(o.port), "--binary", bin,
		"--cluster-id", strconv.FormatUint(o.g.clusterID, 10), "--development="+strconv.FormatBool(o.development), "--ready-fd", "3")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this process and its terminal
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("starting the supervisor %s: %w", exe, err)
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
	timeout := time.NewTimer(launch.DefaultReadyTimeout + 10*time.Second)
	defer timeout.Stop()
	var a answer
	select {
	case a = <-got:
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return ctx.Err()
	case <-timeout.C:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return fmt.Errorf("tigerbeetle did not start within %s; see %s", launch.DefaultReadyTimeout+10*time.Second, logPath)
	}
	if a.err != nil || strings.TrimSpace(a.line) == "" {
		<-exited
		return fmt.Errorf("the server supervisor exited before the server was ready; see %s:\n%s", logPath, tail(logPath, 2000))
	}
	var res struct {
		serverJSON
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.line), &res); err != nil {
		return fmt.Errorf("the server supervisor said %q: %w", a.line, err)
	}
	if res.Error != "" {
		return errors.New(res.Error)
	}
	st := res.serverJSON
	return p.emit(st, func() {
		p.printf("started tigerbeetle in the background\n")
		o.printStatus(p, st)
	})
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

// serve launches the server, reports on the ready descriptor and supervises
// it until it is told to stop (SIGTERM, SIGINT) or the server dies.
func (o *serverOptions) serve(ctx context.Context) error {
	dir, err := o.directory()
	if err != nil {
		return err
	}
	report := func(v any) {
		if o.readyFD <= 0 {
			return
		}
		f := os.NewFile(uintptr(o.readyFD), "ready")
		_ = json.NewEncoder(f).Encode(v)
		f.Close()
	}
	proc, err := launch.Start(ctx, dir,
		launch.WithBinary(o.binary),
		launch.WithPort(o.port),
		launch.WithClusterID(o.g.clusterID),
		launch.WithDevelopment(o.development),
		launch.WithStderr(o.g.stderr))
	if err != nil {
		report(map[string]string{"error": err.Error()})
		return err
	}
	st := serverJSON{
		Running:     true,
		Answering:   true, // Launch waited for an answer
		PID:         os.Getpid(),
		ServerPID:   proc.Cmd.Process.Pid,
		Addresses:   proc.Addresses,
		ClusterID:   proc.ClusterID,
		Dir:         dir,
		DataFile:    proc.DataFile,
		LogFile:     filepath.Join(dir, logFile),
		Development: o.development,
		Started:     time.Now().UTC().Format(time.RFC3339),
	}
	state := filepath.Join(dir, stateFile)
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(state+".tmp", append(b, '\n'), 0o600); err == nil {
		err = os.Rename(state+".tmp", state)
	}
	if err != nil {
		_ = proc.Stop()
		report(map[string]string{"error": err.Error()})
		return err
	}
	report(st)
	fmt.Fprintf(o.g.stderr, "tblimit: tigerbeetle running at %s (pid %d)\n", strings.Join(st.Addresses, ","), st.ServerPID)
	died := make(chan error, 1)
	go func() { died <- proc.Wait() }()
	select {
	case <-ctx.Done():
		err = proc.Stop()
		fmt.Fprintln(o.g.stderr, "tblimit: tigerbeetle stopped")
	case err = <-died:
		err = fmt.Errorf("tigerbeetle exited by itself: %v", err)
	}
	_ = os.Remove(state)
	return err
}

func (o *serverOptions) down(ctx context.Context) error {
	dir, err := o.directory()
	if err != nil {
		return err
	}
	st, ok, err := readState(dir)
	if err != nil {
		return err
	}
	p := o.g.out()
	stopped := false
	if ok {
		for _, pid := range []int{st.PID, st.ServerPID} {
			if ours(pid, st.Dir) {
				stopped = true
				if err := stop(ctx, pid); err != nil {
					return err
				}
			}
		}
		_ = os.Remove(filepath.Join(dir, stateFile))
	}
	purged := ""
	if o.purge {
		files, _ := filepath.Glob(filepath.Join(dir, "*.tigerbeetle"))
		for _, f := range files {
			if err := os.Remove(f); err != nil {
				return err
			}
			purged += " " + f
		}
	}
	st.Running, st.Answering = false, false
	return p.emit(st, func() {
		switch {
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
// tigerbeetle serve --dir DIR) and the server's (tigerbeetle start
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

// stop sends SIGTERM to pid and waits for it to go, then SIGKILL.
func stop(ctx context.Context, pid int) error {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(launch.DefaultStopTimeout + 5*time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("process %d did not stop after SIGTERM and was killed", pid)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
