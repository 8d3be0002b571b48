package launch

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
	"syscall"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

const (
	// waitDelay bounds how long Wait keeps draining a dead server's output pipes.
	waitDelay = 2 * time.Second

	// errTail is how much of a server's output goes into an error message.
	errTail = 8 << 10
)

// Process is one running (or exited) `tigerbeetle start`: the server Start returns, or one
// replica of a Cluster. Its methods are safe for concurrent use; its fields are read-only.
type Process struct {
	// Addresses is what tb.NewClient needs to reach the cluster: every replica's loopback
	// host:port, in replica order.
	Addresses []string
	// Address is where this replica listens: Addresses[Replica].
	Address string
	// Replica is the replica's index in its cluster (0 for a single server).
	Replica int
	// ClusterID is the cluster ID the data file was formatted with.
	ClusterID uint64
	// DataFile is the absolute path of the data file.
	DataFile string
	// Cmd is the `tigerbeetle start` command. Use Stop, Kill and Wait rather than its
	// methods.
	Cmd *exec.Cmd

	child       *child
	stdin       io.Closer // nil unless started with --addresses=0
	logs        *logBuffer
	stopTimeout time.Duration

	stopping atomic.Bool
	endOnce  sync.Once
	endErr   error
}

// Start formats a data file for a single-replica cluster in dir (unless one exists there
// already, so that a dir can be reused across starts), starts `tigerbeetle start` on it
// and returns once a client got an answer. It fails fast, with the server's output in the
// error, when the server exits during start-up; it never waits longer than the ready
// timeout (WithReadyTimeout), nor after ctx is done. ctx bounds start-up only: the server
// runs until Stop or Kill. A data file takes about 1.1 GB.
//
// The server runs in its own process group. On Linux it is killed if the launching process
// dies; without WithPort it also exits when the launching process dies, on every system.
func Start(ctx context.Context, dir string, opts ...Option) (*Process, error) {
	cfg := newConfig(opts)
	bin, err := FindBinary(cfg.binary)
	if err != nil {
		return nil, err
	}
	if cfg.port < 0 || cfg.port > 65535 {
		return nil, fmt.Errorf("launch: port %d out of range 0..65535", cfg.port)
	}
	ctx, cancel := readyContext(ctx, cfg)
	defer cancel()
	files, err := prepareDir(ctx, bin, cfg, dir, 1)
	if err != nil {
		return nil, err
	}
	addresses := "0"
	if cfg.port != 0 {
		addresses = loopback(cfg.port)
	}
	p, err := spawn(bin, cfg, files[0], 0, addresses)
	if err != nil {
		return nil, err
	}
	if err := p.ready(ctx, cfg); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

// readyContext bounds start-up by the ready timeout.
func readyContext(ctx context.Context, cfg config) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, cfg.readyTimeout,
		fmt.Errorf("not ready within %v: %w", cfg.readyTimeout, context.DeadlineExceeded))
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// DataFileName follows TigerBeetle's <cluster>_<replica>.tigerbeetle convention.
func DataFileName(clusterID uint64, replica int) string {
	return strconv.FormatUint(clusterID, 10) + "_" + strconv.Itoa(replica) + ".tigerbeetle"
}

// prepareDir creates dir and formats the data files of a cluster of n replicas there,
// unless all of them exist already. A dir that holds the files of some replicas only, or of
// a larger cluster, is refused: a data file remembers the replica count it was formatted
// for, and tigerbeetle would refuse to start it with another.
func prepareDir(ctx context.Context, bin string, cfg config, dir string, n int) ([]string, error) {
	if dir == "" {
		return nil, errors.New("launch: no directory for the data files")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	files := make([]string, n)
	exist := 0
	for i := range files {
		files[i] = filepath.Join(dir, DataFileName(cfg.clusterID, i))
		switch _, err := os.Stat(files[i]); {
		case err == nil:
			exist++
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("launch: %w", err)
		}
	}
	extra := filepath.Join(dir, DataFileName(cfg.clusterID, n))
	if _, err := os.Stat(extra); err == nil || (exist > 0 && exist < n) {
		return nil, fmt.Errorf("launch: %s holds data files of cluster %d that are not those of %d replica(s); "+
			"remove them or use another directory", dir, cfg.clusterID, n)
	}
	if exist == n {
		return files, nil
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range files {
		wg.Go(func() { errs[i] = format(ctx, bin, cfg, files[i], i, n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, f := range files {
			_ = os.Remove(f)
		}
		return nil, err
	}
	return files, nil
}

// format runs `tigerbeetle format` and removes what it leaves behind when it fails.
func format(ctx context.Context, bin string, cfg config, dataFile string, replica, count int) error {
	args := []string{
		"format",
		"--cluster=" + strconv.FormatUint(cfg.clusterID, 10),
		"--replica=" + strconv.Itoa(replica),
		"--replica-count=" + strconv.Itoa(count),
	}
	if cfg.development {
		args = append(args, "--development")
	}
	args = append(args, dataFile)

	out := newLogBuffer(logKeep, cfg.stderr)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = waitDelay
	c, err := startChild(cmd)
	if err != nil {
		return fmt.Errorf("launch: %s: %w", commandLine(cmd), err)
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-c.done
		_ = os.Remove(dataFile)
		return fmt.Errorf("launch: %s: %w; output:\n%s", commandLine(cmd), context.Cause(ctx), out.Tail(errTail))
	}
	if c.err != nil {
		_ = os.Remove(dataFile)
		return fmt.Errorf("launch: %s: %w; output:\n%s", commandLine(cmd), c.err, out.Tail(errTail))
	}
	if _, err := os.Stat(dataFile); err != nil {
		return fmt.Errorf("launch: %s succeeded but left no data file: %w", commandLine(cmd), err)
	}
	return nil
}

// spawn runs `tigerbeetle start --addresses=addresses dataFile` and returns at once.
func spawn(bin string, cfg config, dataFile string, replica int, addresses string) (*Process, error) {
	args := []string{"start", "--addresses=" + addresses}
	if cfg.development {
		args = append(args, "--development")
	}
	if cfg.pipeline > 0 {
		args = append(args, "--experimental", "--limit-pipeline-requests="+strconv.Itoa(cfg.pipeline))
	}
	args = append(args, dataFile)

	logs := newLogBuffer(logKeep, cfg.stderr)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.WaitDelay = waitDelay
	p := &Process{Replica: replica, ClusterID: cfg.clusterID, DataFile: dataFile, Cmd: cmd, logs: logs, stopTimeout: cfg.stopTimeout}
	if addresses == "0" {
		// With --addresses=0, tigerbeetle prints its port first on stdout, and exits when
		// its standard input closes: keep a pipe open for as long as the server should live.
		// It closes by itself if this process dies.
		cmd.Stdout = newFirstLine(logs)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, fmt.Errorf("launch: %w", err)
		}
		p.stdin = stdin
	} else {
		p.Addresses = strings.Split(addresses, ",")
		p.Address = p.Addresses[replica]
	}
	c, err := startChild(cmd)
	if err != nil {
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
		return nil, fmt.Errorf("launch: %s: %w", commandLine(cmd), err)
	}
	p.child = c
	return p, nil
}

// ready waits until the server started by spawn answers: it learns the port first if the
// server picked it.
func (p *Process) ready(ctx context.Context, cfg config) error {
	if p.Address == "" {
		first := p.Cmd.Stdout.(*firstLine)
		select {
		case line := <-first.ch:
			n, err := strconv.ParseUint(strings.TrimSpace(line), 10, 16)
			if err != nil || n == 0 {
				return fmt.Errorf("launch: %s printed %q on stdout, want the port it listens on; output:\n%s",
					commandLine(p.Cmd), line, p.logs.Tail(errTail))
			}
			p.Address = loopback(int(n))
			p.Addresses = []string{p.Address}
		case <-p.child.done:
			return p.exitedError()
		case <-ctx.Done():
			return p.notReadyError(ctx, "printed no port")
		}
	}
	return probe(ctx, cfg, []*Process{p})
}

// probe waits until cfg.probe says the cluster of ps answers, failing fast when one of
// them exits.
func probe(ctx context.Context, cfg config, ps []*Process) error {
	probeCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	for _, p := range ps {
		go func() {
			select {
			case <-p.child.done:
				cancel(ErrExited)
			case <-probeCtx.Done():
			}
		}()
	}
	err := cfg.probe(probeCtx, cfg.clusterID, ps[0].Addresses)
	if err == nil {
		return nil
	}
	for _, p := range ps {
		if p.Exited() {
			return p.exitedError()
		}
	}
	if ctx.Err() != nil {
		return ps[0].notReadyError(ctx, "at "+strings.Join(ps[0].Addresses, ",")+" did not answer (a server whose data file "+
			"was formatted for another cluster than "+strconv.FormatUint(cfg.clusterID, 10)+" never does)")
	}
	return fmt.Errorf("launch: tigerbeetle at %s did not answer: %w; output:\n%s",
		strings.Join(ps[0].Addresses, ","), err, ps[0].logs.Tail(errTail))
}

// nopProbe waits for a Nop to complete. With the 0.17 client a Nop completes only after the
// client registered with the cluster, a round trip through the primary; a server of another
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
			return fmt.Errorf("nop: %w", err)
		}
		return nil
	case <-ctx.Done():
		go client.Close() // never let start-up wait on the client
		return context.Cause(ctx)
	}
}

func (p *Process) exitedError() error {
	return fmt.Errorf("%w (%v): %s; output:\n%s", ErrExited, p.child.err, commandLine(p.Cmd), p.logs.Tail(errTail))
}

func (p *Process) notReadyError(ctx context.Context, what string) error {
	return fmt.Errorf("launch: %s %s: %w; output:\n%s", commandLine(p.Cmd), what, context.Cause(ctx), p.logs.Tail(errTail))
}

// Stop ends the server: SIGTERM, then SIGKILL if it has not exited after the stop timeout,
// and waits until it is gone. It returns an error if the server had exited by itself before
// with a failure, or needed SIGKILL. Calling Stop or Kill again returns the same result.
func (p *Process) Stop() error {
	p.endOnce.Do(func() { p.endErr = p.end(false) })
	return p.endErr
}

// Kill ends the server at once with SIGKILL, as a crash or a power cut would, and waits
// until it is gone. It returns an error only if the server had exited by itself before with
// a failure. Calling Stop or Kill again returns the same result.
func (p *Process) Kill() error {
	p.endOnce.Do(func() { p.endErr = p.end(true) })
	return p.endErr
}

func (p *Process) end(kill bool) error {
	p.stopping.Store(true)
	if p.stdin != nil {
		defer p.stdin.Close()
	}
	pid := p.Cmd.Process.Pid
	select {
	case <-p.child.done:
		if p.child.err != nil {
			return fmt.Errorf("launch: tigerbeetle (pid %d) had exited before Stop: %w; output:\n%s",
				pid, p.child.err, p.logs.Tail(errTail))
		}
		return nil
	default:
	}
	if kill {
		_ = p.Cmd.Process.Kill()
		<-p.child.done
		return nil
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
	return fmt.Errorf("launch: tigerbeetle (pid %d) was still running %v after SIGTERM and was killed", pid, p.stopTimeout)
}

// Wait blocks until the server exits and returns how it ended (see exec.Cmd.Wait).
func (p *Process) Wait() error {
	<-p.child.done
	return p.child.err
}

// Done is closed once the server has exited, for whatever reason.
func (p *Process) Done() <-chan struct{} { return p.child.done }

// Exited reports whether the server has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.child.done:
		return true
	default:
		return false
	}
}

// Stopped reports whether Stop or Kill was called: an exit that follows is no surprise.
func (p *Process) Stopped() bool { return p.stopping.Load() }

// Remove deletes the data file. Call it after Stop. A missing file is not an error.
func (p *Process) Remove() error { return removeFile(p.DataFile) }

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("launch: %w", err)
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
		if err := startRetryingBusy(cmd); err != nil {
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

// startRetryingBusy starts cmd, again for a while when its executable is
// "text file busy": a script just written (a test's stand-in binary) whose
// write descriptor a process forked meanwhile by another goroutine still
// holds until it execs (golang/go#22315).
func startRetryingBusy(cmd *exec.Cmd) error {
	for delay := time.Millisecond; ; delay *= 2 {
		err := cmd.Start()
		if !errors.Is(err, syscall.ETXTBSY) || delay > 500*time.Millisecond {
			return err
		}
		time.Sleep(delay)
		// A failed Start may not be retried on the same Cmd.
		next := exec.Command(cmd.Path, cmd.Args[1:]...)
		next.Env, next.Dir, next.Stdin, next.Stdout, next.Stderr = cmd.Env, cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr
		next.ExtraFiles, next.SysProcAttr, next.WaitDelay = cmd.ExtraFiles, cmd.SysProcAttr, cmd.WaitDelay
		*cmd = *next
	}
}

func commandLine(cmd *exec.Cmd) string {
	return strings.Join(cmd.Args, " ")
}
