package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

const (
	// DefaultReadyTimeout bounds Launch (format, start and the first answer) when
	// Config.ReadyTimeout is zero.
	DefaultReadyTimeout = 60 * time.Second

	// DefaultStopTimeout is how long Stop waits after SIGTERM before it sends SIGKILL, when
	// Config.StopTimeout is zero.
	DefaultStopTimeout = 5 * time.Second

	// waitDelay bounds how long Wait keeps draining a dead server's output pipes.
	waitDelay = 2 * time.Second

	// errTail is how much of a server's output goes into an error message.
	errTail = 8 << 10
)

// Config says how Launch starts a single-replica TigerBeetle cluster.
type Config struct {
	// Binary is the tigerbeetle executable; empty means FindBinary("").
	Binary string

	// Dir is the directory that holds the data file; it is created if needed. Launch formats
	// a data file there unless one for ClusterID already exists, so a Dir can be reused
	// across launches. A data file takes about 1.1 GB.
	Dir string

	// Port is the loopback port to listen on; 0 lets the operating system pick a free one
	// (tigerbeetle's --addresses=0 mode, which also makes the server exit when the process
	// that launched it dies, since its standard input then closes). With a fixed port the
	// readiness client may log "ConnectionRefused" warnings until the server listens.
	Port int

	// ClusterID is the cluster the data file is formatted for. A client with another
	// cluster ID never gets an answer.
	ClusterID uint64

	// Development passes --development to format and start: no Direct I/O needed (tmpfs,
	// overlay file systems), small caches, and requests capped at 32 KiB (about 250
	// transfers instead of 8189). Right for tests, wrong for benchmarks.
	Development bool

	// Stderr, if not nil, receives the server's output as it comes. The last 64 KiB are
	// kept in any case; see Process.Stderr.
	Stderr io.Writer

	// ReadyTimeout bounds the whole of Launch: formatting, starting and waiting for the
	// server's first answer. Zero means DefaultReadyTimeout.
	ReadyTimeout time.Duration

	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL. Zero means
	// DefaultStopTimeout.
	StopTimeout time.Duration
}

// Process is a running tigerbeetle server started by Launch. Stop it, then Remove its data
// file if it was temporary. Its methods are safe for concurrent use.
type Process struct {
	// Addresses is what tb.NewClient needs to reach the server: one loopback host:port.
	Addresses []string
	// ClusterID is the cluster ID the server was formatted with.
	ClusterID uint64
	// DataFile is the absolute path of the data file.
	DataFile string
	// Cmd is the running `tigerbeetle start` command. Use Stop and Wait rather than its
	// methods.
	Cmd *exec.Cmd

	child       *child
	stdin       io.Closer
	logs        *logBuffer
	stopTimeout time.Duration
	temporary   bool // the data file goes when the test binary is interrupted

	stopping atomic.Bool
	stopOnce sync.Once
	stopErr  error
}

// Launch formats a data file in cfg.Dir (unless it exists already), starts `tigerbeetle
// start` on it and returns once a client got an answer from the server. It fails fast, with
// the server's output in the error, when the server exits during start-up; it never waits
// longer than cfg.ReadyTimeout, nor after ctx is done. ctx bounds start-up only: the server
// runs until Stop.
//
// The server runs in its own process group. On Linux it is killed if the launching process
// dies; with Port 0 it also exits when the launching process dies, on every system.
func Launch(ctx context.Context, cfg Config) (*Process, error) {
	return launch(ctx, cfg, nopProbe)
}

// probeFunc returns nil once the server at addresses answered a client of clusterID. It
// must return promptly when ctx is done.
type probeFunc func(ctx context.Context, clusterID uint64, addresses []string) error

// nopProbe waits for a Nop to complete. With the 0.17 client a Nop completes only after the
// client registered with the cluster, a round trip through the replica; a server of another
// cluster, or none at all, never answers, and the client retries for ever, so the wait is
// cut by ctx, after which Close makes the pending Nop return.
func nopProbe(ctx context.Context, clusterID uint64, addresses []string) error {
	client, err := tb.NewClient(tb.ToUint128(clusterID), addresses)
	if err != nil {
		return fmt.Errorf("tb.NewClient(%d, %v): %w", clusterID, addresses, err)
	}
	answer := make(chan error, 1)
	go func() { answer <- client.Nop() }()
	select {
	case err := <-answer:
		client.Close()
		if err != nil {
			return fmt.Errorf("Nop: %w", err)
		}
		return nil
	case <-ctx.Done():
		go client.Close() // never let start-up wait on the client
		return context.Cause(ctx)
	}
}

func launch(ctx context.Context, cfg Config, probe probeFunc) (*Process, error) {
	bin, err := FindBinary(cfg.Binary)
	if err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		return nil, errors.New("testenv: Config.Dir is empty")
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("testenv: Config.Port %d out of range 0..65535", cfg.Port)
	}
	timeout := cfg.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout,
		fmt.Errorf("not ready within %v: %w", timeout, context.DeadlineExceeded))
	defer cancel()

	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	dataFile := filepath.Join(dir, dataFileName(cfg.ClusterID))
	switch _, err := os.Stat(dataFile); {
	case errors.Is(err, fs.ErrNotExist):
		if err := format(ctx, bin, cfg, dataFile); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("testenv: %w", err)
	}
	return start(ctx, bin, cfg, dataFile, probe)
}

// dataFileName follows TigerBeetle's <cluster>_<replica>.tigerbeetle convention.
func dataFileName(clusterID uint64) string {
	return strconv.FormatUint(clusterID, 10) + "_0.tigerbeetle"
}

// format runs `tigerbeetle format` and removes what it leaves behind when it fails.
func format(ctx context.Context, bin string, cfg Config, dataFile string) error {
	args := []string{
		"format",
		"--cluster=" + strconv.FormatUint(cfg.ClusterID, 10),
		"--replica=0",
		"--replica-count=1",
	}
	if cfg.Development {
		args = append(args, "--development")
	}
	args = append(args, dataFile)

	out := newLogBuffer(logKeep, cfg.Stderr)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = waitDelay
	c, err := startChild(cmd)
	if err != nil {
		return fmt.Errorf("testenv: %s: %w", commandLine(cmd), err)
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-c.done
		_ = os.Remove(dataFile)
		return fmt.Errorf("testenv: %s: %w; output:\n%s", commandLine(cmd), context.Cause(ctx), out.Tail(errTail))
	}
	if c.err != nil {
		_ = os.Remove(dataFile)
		return fmt.Errorf("testenv: %s: %w; output:\n%s", commandLine(cmd), c.err, out.Tail(errTail))
	}
	if _, err := os.Stat(dataFile); err != nil {
		return fmt.Errorf("testenv: %s succeeded but left no data file: %w", commandLine(cmd), err)
	}
	return nil
}

// start runs `tigerbeetle start` and waits until it answers.
func start(ctx context.Context, bin string, cfg Config, dataFile string, probe probeFunc) (_ *Process, err error) {
	addresses := "0"
	if cfg.Port != 0 {
		addresses = net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port))
	}
	args := []string{"start", "--addresses=" + addresses}
	if cfg.Development {
		args = append(args, "--development")
	}
	args = append(args, dataFile)

	logs := newLogBuffer(logKeep, cfg.Stderr)
	stdout := newFirstLine(logs)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = stdout, logs
	cmd.WaitDelay = waitDelay
	// With --addresses=0, tigerbeetle exits when its standard input closes: keep a pipe
	// open for as long as the server should live. It closes by itself if this process dies.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	c, err := startChild(cmd)
	if err != nil {
		_ = stdin.Close()
		return nil, fmt.Errorf("testenv: %s: %w", commandLine(cmd), err)
	}
	stopTimeout := cfg.StopTimeout
	if stopTimeout <= 0 {
		stopTimeout = DefaultStopTimeout
	}
	p := &Process{
		ClusterID:   cfg.ClusterID,
		DataFile:    dataFile,
		Cmd:         cmd,
		child:       c,
		stdin:       stdin,
		logs:        logs,
		stopTimeout: stopTimeout,
	}
	registerLive(p)
	defer func() {
		if err != nil {
			_ = p.Stop()
		}
	}()

	port := cfg.Port
	if port == 0 {
		select {
		case line := <-stdout.ch:
			n, perr := strconv.ParseUint(strings.TrimSpace(line), 10, 16)
			if perr != nil || n == 0 {
				return nil, fmt.Errorf("testenv: %s printed %q on stdout, want the port it listens on; output:\n%s",
					commandLine(cmd), line, logs.Tail(errTail))
			}
			port = int(n)
		case <-c.done:
			return nil, p.exitedError()
		case <-ctx.Done():
			return nil, p.notReadyError(ctx, "")
		}
	}
	p.Addresses = []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}

	probeCtx, cancelProbe := context.WithCancelCause(ctx)
	defer cancelProbe(nil)
	go func() {
		select {
		case <-c.done:
			cancelProbe(ErrExited)
		case <-probeCtx.Done():
		}
	}()
	if perr := probe(probeCtx, cfg.ClusterID, p.Addresses); perr != nil {
		select {
		case <-c.done:
			return nil, p.exitedError()
		default:
		}
		if ctx.Err() != nil {
			return nil, p.notReadyError(ctx, p.Addresses[0])
		}
		return nil, fmt.Errorf("testenv: tigerbeetle at %s did not answer: %w; output:\n%s",
			p.Addresses[0], perr, logs.Tail(errTail))
	}
	return p, nil
}

func (p *Process) exitedError() error {
	return fmt.Errorf("%w (%v): %s; output:\n%s", ErrExited, p.child.err, commandLine(p.Cmd), p.logs.Tail(errTail))
}

func (p *Process) notReadyError(ctx context.Context, addr string) error {
	what := "printed no port"
	if addr != "" {
		what = "at " + addr + " did not answer (a server whose data file was formatted for " +
			"another cluster than " + strconv.FormatUint(p.ClusterID, 10) + " never does)"
	}
	return fmt.Errorf("testenv: %s %s: %w; output:\n%s", commandLine(p.Cmd), what, context.Cause(ctx), p.logs.Tail(errTail))
}

// Stop ends the server: SIGTERM, then SIGKILL if it has not exited after the stop timeout,
// and waits until it is gone. It returns an error if the server had exited by itself before
// with a failure, or needed SIGKILL. Calling Stop again returns the same result.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() { p.stopErr = p.stop() })
	return p.stopErr
}

func (p *Process) stop() error {
	p.stopping.Store(true)
	defer unregisterLive(p)
	defer p.stdin.Close()
	pid := p.Cmd.Process.Pid
	select {
	case <-p.child.done:
		if p.child.err != nil {
			return fmt.Errorf("testenv: tigerbeetle (pid %d) had exited before Stop: %w; output:\n%s",
				pid, p.child.err, p.logs.Tail(errTail))
		}
		return nil
	default:
	}
	_ = terminate(p.Cmd.Process)
	timer := time.NewTimer(p.stopTimeout)
	defer timer.Stop()
	select {
	case <-p.child.done:
		return nil
	case <-timer.C:
	}
	_ = p.Cmd.Process.Kill()
	<-p.child.done
	return fmt.Errorf("testenv: tigerbeetle (pid %d) was still running %v after SIGTERM and was killed", pid, p.stopTimeout)
}

// Wait blocks until the server exits and returns how it ended (see exec.Cmd.Wait).
func (p *Process) Wait() error {
	<-p.child.done
	return p.child.err
}

// Remove deletes the data file. Call it after Stop. A missing file is not an error.
func (p *Process) Remove() error {
	if err := os.Remove(p.DataFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("testenv: %w", err)
	}
	return nil
}

// Stderr returns the end (up to 64 KiB) of what the server wrote on stderr and stdout.
func (p *Process) Stderr() string { return p.logs.Tail(logKeep) }

// child is a started command whose exit is observed by one goroutine.
type child struct {
	done chan struct{} // closed once the command was reaped
	err  error         // the result of cmd.Wait, valid once done is closed
}

// startChild starts cmd from a goroutine locked to its OS thread, which stays alive until
// the child is reaped: Linux's Pdeathsig (setProcAttr) fires when the starting thread
// exits, and Go may end a thread that is neither locked nor in use.
func startChild(cmd *exec.Cmd) (*child, error) {
	setProcAttr(cmd)
	c := &child{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.err = cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

func commandLine(cmd *exec.Cmd) string {
	return strings.Join(cmd.Args, " ")
}

// live holds the processes launched and not yet stopped, for Main to stop on an interrupt.
var live struct {
	sync.Mutex
	m map[*Process]struct{}
}

func registerLive(p *Process) {
	live.Lock()
	defer live.Unlock()
	if live.m == nil {
		live.m = make(map[*Process]struct{})
	}
	live.m[p] = struct{}{}
}

func unregisterLive(p *Process) {
	live.Lock()
	defer live.Unlock()
	delete(live.m, p)
}

func liveProcesses() []*Process {
	live.Lock()
	defer live.Unlock()
	ps := make([]*Process, 0, len(live.m))
	for p := range live.m {
		ps = append(ps, p)
	}
	return ps
}
