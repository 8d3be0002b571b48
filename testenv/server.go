package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

const (
	// skipNoBinary is the one line a test skips with when there is no binary.
	skipNoBinary = "testenv: no tigerbeetle binary: set $" + EnvBinary +
		" or put tigerbeetle on PATH (scripts/install-tigerbeetle.sh installs one)"
	skipShort = "testenv: -short: skipping a test that needs a real tigerbeetle server"

	// sharedDirPrefix names the temporary directories of shared servers; ownerFile in each
	// holds the pid of the test binary that owns it, so that a later run can delete the
	// directories of test binaries that died without cleaning up.
	sharedDirPrefix = "tblimit-testenv-"
	ownerFile       = "owner.pid"
)

// Server is a tigerbeetle server for tests, started by Start or Shared. It listens on a
// free loopback port, keeps its data in a temporary directory and runs with --development,
// which is fine for tests and wrong for benchmarks: requests are capped at 32 KiB (about
// 250 transfers, not 8189), caches are tiny, and the server holds few client connections at
// a time (8, per TigerBeetle's source; a further client waits until one closes). Its fields
// are read-only.
type Server struct {
	// Addresses and ClusterID are what tb.NewClient needs; Client does that for you.
	Addresses []string
	ClusterID uint64

	proc *Process
}

// Process returns the server's process, for its output (Process.Stderr) or its data file.
func (s *Server) Process() *Process { return s.proc }

// Client returns a new client of the server, closed when the test ends.
func (s *Server) Client(t testing.TB) tb.Client {
	t.Helper()
	c, err := tb.NewClient(tb.ToUint128(s.ClusterID), s.Addresses)
	if err != nil {
		t.Fatalf("testenv: tb.NewClient(%d, %v): %v", s.ClusterID, s.Addresses, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Option configures Start.
type Option func(*options)

type options struct {
	binary       string
	clusterID    uint64
	readyTimeout time.Duration
	probe        probeFunc
}

// WithBinary makes Start use this tigerbeetle binary instead of $TIGERBEETLE_BIN or PATH.
func WithBinary(path string) Option { return func(o *options) { o.binary = path } }

// WithClusterID makes Start format the server for this cluster ID instead of 0.
func WithClusterID(id uint64) Option { return func(o *options) { o.clusterID = id } }

// WithReadyTimeout bounds how long Start waits for the server (DefaultReadyTimeout if not
// given).
func WithReadyTimeout(d time.Duration) Option { return func(o *options) { o.readyTimeout = d } }

// defaultProbe is how Start and Shared wait for a server; tests of this package replace it
// before any test runs.
var defaultProbe probeFunc = nopProbe

func newOptions(opts []Option) options {
	o := options{probe: defaultProbe}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// skipped counts the tests skipped for lack of a binary, for Main's summary line.
var skipped atomic.Int64

// findOrSkip returns the binary to use, or ends the test: t.Skip when there is none or
// under -short, t.Fatal when one was named but is unusable.
func findOrSkip(t testing.TB, explicit string) string {
	t.Helper()
	if testing.Short() {
		t.Skip(skipShort)
	}
	bin, err := FindBinary(explicit)
	if errors.Is(err, ErrNoBinary) {
		skipped.Add(1)
		t.Skip(skipNoBinary)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Start starts a tigerbeetle server for this test, like httptest.NewServer: data in
// t.TempDir(), a free loopback port, --development. It returns once the server answers.
// When the test ends (also if it fails or panics) the server gets SIGTERM, is waited for and
// its data file is removed; if the test failed, the server's output is logged.
//
// Start skips the test under -short and when no binary is found (see FindBinary); a
// server that fails to start fails the test with the server's output. Starting takes a few
// seconds and about 1.1 GB of disk and 1.5 GB of memory: most tests want Shared.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	o := newOptions(opts)
	bin := findOrSkip(t, o.binary)
	p, err := launch(context.Background(), Config{
		Binary:       bin,
		Dir:          t.TempDir(),
		ClusterID:    o.clusterID,
		Development:  true,
		ReadyTimeout: o.readyTimeout,
	}, o.probe)
	if err != nil {
		t.Fatal(err)
	}
	p.temporary = true
	go reportUnexpectedExit(p)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testenv: output of tigerbeetle %s:\n%s", p.Addresses[0], p.logs.Tail(errTail))
		}
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
		if err := p.Remove(); err != nil {
			t.Error(err)
		}
	})
	return &Server{Addresses: p.Addresses, ClusterID: p.ClusterID, proc: p}
}

// reportUnexpectedExit says on stderr when a test server dies before it is stopped: its
// clients would otherwise wait for ever, silently.
func reportUnexpectedExit(p *Process) {
	<-p.child.done
	if p.stopping.Load() {
		return
	}
	fmt.Fprintf(os.Stderr, "testenv: tigerbeetle %s (pid %d) exited while in use (%v); its clients will hang; output:\n%s\n",
		p.Addresses[0], p.Cmd.Process.Pid, p.child.err, p.logs.Tail(errTail))
}

// mainRunning is set by Main; Shared needs it.
var mainRunning atomic.Bool

// shared is the package's shared server.
var shared struct {
	mu  sync.Mutex // held while starting
	srv *Server
	err error // why the first start failed; later callers fail the same way
}

// tempDirs are directories Main removes at the end (and on an interrupt).
var tempDirs struct {
	sync.Mutex
	list []string
}

func addTempDir(dir string) {
	tempDirs.Lock()
	defer tempDirs.Unlock()
	tempDirs.list = append(tempDirs.list, dir)
}

// Shared returns the server shared by all tests of the package, starting it on first use.
// Tests on it must not see each other's data: give each its own ledger (Backend.NewLedger)
// or its own account IDs. Like Start's, it runs with --development (see Server) and skips
// under -short or without a binary. Main, called from TestMain, stops it and removes its
// data at the end of the run, also when the run is interrupted.
func Shared(t testing.TB) *Server {
	t.Helper()
	if !mainRunning.Load() {
		t.Fatal("testenv: Shared needs TestMain to call testenv.Main(m), which stops the shared server")
	}
	if testing.Short() {
		t.Skip(skipShort)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		return shared.srv
	}
	if shared.err != nil {
		t.Fatalf("testenv: the shared tigerbeetle server failed to start for an earlier test: %v", shared.err)
	}
	bin := findOrSkip(t, "")
	srv, err := startShared(bin)
	if err != nil {
		shared.err = err
		t.Fatal(err)
	}
	shared.srv = srv
	return srv
}

func startShared(bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", sharedDirPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	addTempDir(dir)
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	o := newOptions(nil)
	p, err := launch(context.Background(), Config{
		Binary:      bin,
		Dir:         dir,
		Development: true,
	}, o.probe)
	if err != nil {
		return nil, err
	}
	p.temporary = true
	go reportUnexpectedExit(p)
	return &Server{Addresses: p.Addresses, ClusterID: p.ClusterID, proc: p}, nil
}

// Main runs the tests of a package that uses Shared or Start; call it from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// After the tests, and also when the test binary gets SIGINT or SIGTERM, it stops the
// servers still running and removes their data. It prints one line when tests were skipped
// for lack of a tigerbeetle binary, and exits with m.Run's code.
//
// A test that panics (or a -timeout) ends the test binary at once, without running Main's
// clean-up; the shared server dies with it (killed by Linux's Pdeathsig, and on any system
// it exits when its standard input closes), and the next Main in any package deletes the
// data directories of test binaries that are no longer running.
func Main(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	mainRunning.Store(true)
	sweepStale(os.TempDir())
	stop := handleInterrupts()
	defer stop()
	code := func() int {
		defer shutdown() // also when a test's panic reaches this goroutine
		return m.Run()
	}()
	if n := skipped.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "testenv: %d test(s) needing a real tigerbeetle server skipped: no binary; set $%s or put tigerbeetle on PATH (scripts/install-tigerbeetle.sh installs one)\n", n, EnvBinary)
	}
	return code
}

// shutdown stops every server still running and removes temporary data.
func shutdown() {
	var wg sync.WaitGroup
	for _, p := range liveProcesses() {
		wg.Go(func() {
			if err := p.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			if p.temporary {
				if err := p.Remove(); err != nil {
					fmt.Fprintln(os.Stderr, err)
				}
			}
		})
	}
	wg.Wait()
	tempDirs.Lock()
	defer tempDirs.Unlock()
	for _, dir := range tempDirs.list {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		}
	}
	tempDirs.list = nil
}

// handleInterrupts makes SIGINT and SIGTERM stop the servers before the test binary dies of
// the signal. The returned func uninstalls the handler.
func handleInterrupts() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, interruptSignals...)
	quit := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			fmt.Fprintf(os.Stderr, "testenv: %v: stopping tigerbeetle servers\n", sig)
			shutdown()
			signal.Stop(ch)
			reraise(sig)
			time.Sleep(time.Second) // let the re-raised signal end us
			os.Exit(1)
		case <-quit:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(quit)
	}
}

// sweepStale deletes the shared-server directories in root whose owning test binary is no
// longer running (it crashed, panicked, or was killed): each holds a 1.1 GB data file.
func sweepStale(root string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), sharedDirPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // being created right now, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}
