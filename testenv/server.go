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

	"github.com/tblimit/tblimit/internal/launch"
)

const (
	// skipNoBinary is the one line a test skips with when there is no binary.
	skipNoBinary = "testenv: no tigerbeetle binary: set $" + launch.EnvBinary +
		" or put tigerbeetle on PATH (scripts/install-tigerbeetle.sh installs one)"
	skipShort = "testenv: -short: skipping a test that needs a real tigerbeetle server"

	// sharedDirPrefix names the temporary directories of shared servers; ownerFile in each
	// holds the pid of the test binary that owns it, so that a later run can delete the
	// directories of test binaries that died without cleaning up.
	sharedDirPrefix = "tblimit-testenv-"
	ownerFile       = "owner.pid"

	// logTail is how much of a server's output a failed test logs.
	logTail = 8 << 10
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

	proc *launch.Process
}

// Process returns the server's process, for its output (Process.Stderr) or its data file.
func (s *Server) Process() *launch.Process { return s.proc }

// Client returns a new client of the server, closed when the test ends.
func (s *Server) Client(t testing.TB) tb.Client { return newClient(t, s.ClusterID, s.Addresses) }

func newClient(t testing.TB, clusterID uint64, addresses []string) tb.Client {
	t.Helper()
	c, err := tb.NewClient(tb.ToUint128(clusterID), addresses)
	if err != nil {
		t.Fatalf("testenv: tb.NewClient(%d, %v): %v", clusterID, addresses, err)
	}
	t.Cleanup(c.Close)
	return c
}

// defaultOptions come before a caller's options in Start, StartCluster and Shared. The
// tests of this package add a probe that accepts a fake server.
var defaultOptions = []launch.Option{launch.WithDevelopment(true)}

func withDefaults(opts []launch.Option) []launch.Option {
	return append(append([]launch.Option(nil), defaultOptions...), opts...)
}

// skipped counts the tests skipped for lack of a binary, for Main's summary line.
var skipped atomic.Int64

// findOrSkip ends the test unless a binary is there: t.Skip when there is none, or under
// -short unless the test named its binary itself (launch.WithBinary: a fake, which needs no
// real server); t.Fatal when one was named but is unusable.
func findOrSkip(t testing.TB, opts []launch.Option) {
	t.Helper()
	explicit := launch.BinaryOption(opts...)
	if testing.Short() && explicit == "" {
		t.Skip(skipShort)
	}
	_, err := launch.FindBinary(explicit)
	if errors.Is(err, launch.ErrNoBinary) {
		skipped.Add(1)
		t.Skip(skipNoBinary)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Start starts a tigerbeetle server for this test, like httptest.NewServer: data in
// t.TempDir(), a free loopback port, --development (opts may override the last). It returns
// once the server answers. When the test ends (also if it fails or panics) the server gets
// SIGTERM, is waited for and its data file is removed; if the test failed, the server's
// output is logged.
//
// Start skips the test under -short and when no binary is found (see launch.FindBinary); a
// server that fails to start fails the test with the server's output. Starting takes a few
// seconds and about 1.1 GB of disk and 1.5 GB of memory: most tests want Shared.
func Start(t testing.TB, opts ...launch.Option) *Server {
	t.Helper()
	opts = withDefaults(opts)
	findOrSkip(t, opts)
	// Start-up is bounded by the ready timeout, not by the test's context, so that a
	// cleanup never depends on a context that ends before cleanups run.
	p, err := launch.Start(context.Background(), t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	watch(p)
	untrack := track(p.Stop, p.Remove)
	t.Cleanup(func() {
		defer untrack()
		if t.Failed() {
			t.Logf("testenv: output of tigerbeetle %s:\n%s", p.Address, tail(p.Stderr(), logTail))
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

// Cluster is a local multi-replica tigerbeetle cluster for one test, started by
// StartCluster. Its launch.Cluster methods stop, kill and restart replicas; Client connects
// to all of them.
type Cluster struct {
	*launch.Cluster
}

// Client returns a new client of the cluster, given every replica's address, closed when
// the test ends.
func (c *Cluster) Client(t testing.TB) tb.Client { return newClient(t, c.ClusterID, c.Addresses) }

// StartCluster starts a cluster of n replicas on free loopback ports for this test, like
// Start: data in t.TempDir(), --development, skipped under -short and without a binary. It
// returns once the cluster answers. When the test ends every replica still running is
// stopped and the data files are removed; if the test failed, each replica's output is
// logged. A replica stopped or killed by the test is expected to be down: it is not an
// error, and nothing is reported when it exits.
func StartCluster(t testing.TB, n int, opts ...launch.Option) *Cluster {
	t.Helper()
	opts = withDefaults(opts)
	findOrSkip(t, opts)
	c, err := launch.StartCluster(context.Background(), t.TempDir(), n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	untrack := track(c.Stop, c.Remove)
	t.Cleanup(func() {
		defer untrack()
		if t.Failed() {
			for i := range c.Replicas() {
				p := c.Replica(i)
				t.Logf("testenv: output of replica %d (%s):\n%s", i, p.Address, tail(p.Stderr(), logTail))
			}
		}
		// A replica that crashed during the test shows in the logs above; Stop's errors
		// would repeat it for every replica the test killed on purpose.
		_ = c.Stop()
		if err := c.Remove(); err != nil {
			t.Error(err)
		}
	})
	return &Cluster{c}
}

// tail returns at most the last n bytes of s, from a line boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "[...]\n" + s
}

// watch says on stderr when a test server dies before it is stopped: its clients would
// otherwise wait for ever, silently.
func watch(p *launch.Process) {
	go func() {
		<-p.Done()
		if p.Stopped() {
			return
		}
		fmt.Fprintf(os.Stderr, "testenv: tigerbeetle %s (pid %d) exited while in use (%v); its clients will hang; output:\n%s\n",
			p.Address, p.Cmd.Process.Pid, p.Wait(), tail(p.Stderr(), logTail))
	}()
}

// mainRunning is set by Main; Shared needs it.
var mainRunning atomic.Bool

// shared is the package's shared server.
var shared struct {
	mu  sync.Mutex // held while starting
	srv *Server
	err error // why the first start failed; later callers fail the same way
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
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		return shared.srv
	}
	if shared.err != nil {
		t.Fatalf("testenv: the shared tigerbeetle server failed to start for an earlier test: %v", shared.err)
	}
	opts := withDefaults(nil)
	findOrSkip(t, opts)
	srv, err := startShared(opts)
	if err != nil {
		shared.err = err
		t.Fatal(err)
	}
	shared.srv = srv
	return srv
}

func startShared(opts []launch.Option) (*Server, error) {
	dir, err := os.MkdirTemp("", sharedDirPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	addTempDir(dir)
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	p, err := launch.Start(context.Background(), dir, opts...)
	if err != nil {
		return nil, err
	}
	watch(p)
	track(p.Stop, p.Remove)
	return &Server{Addresses: p.Addresses, ClusterID: p.ClusterID, proc: p}, nil
}

// live holds what Main must stop and remove at the end of the run or on an interrupt.
var live struct {
	sync.Mutex
	next  int
	items map[int]liveItem
}

type liveItem struct{ stop, remove func() error }

// track registers a server or cluster for Main; the returned func forgets it.
func track(stop, remove func() error) (untrack func()) {
	live.Lock()
	defer live.Unlock()
	if live.items == nil {
		live.items = map[int]liveItem{}
	}
	live.next++
	id := live.next
	live.items[id] = liveItem{stop, remove}
	return func() {
		live.Lock()
		defer live.Unlock()
		delete(live.items, id)
	}
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

// Main runs the tests of a package that uses Shared, Start or StartCluster; call it from
// TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// After the tests, and also when the test binary gets SIGINT or SIGTERM, it stops the
// servers still running and removes their data. It prints one line when tests were skipped
// for lack of a tigerbeetle binary, and exits with m.Run's code.
//
// A test that panics (or a -timeout) ends the test binary at once, without running Main's
// clean-up; the servers die with it (killed by Linux's Pdeathsig, and on any system a server
// on a port it chose exits when its standard input closes), and the next Main in any package
// deletes the data directories of shared servers whose test binaries are no longer running.
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
		fmt.Fprintf(os.Stderr, "testenv: %d test(s) needing a real tigerbeetle server skipped: no binary; set $%s or put tigerbeetle on PATH (scripts/install-tigerbeetle.sh installs one)\n", n, launch.EnvBinary)
	}
	return code
}

// shutdown stops every server and cluster still running and removes temporary data.
func shutdown() {
	live.Lock()
	items := make([]liveItem, 0, len(live.items))
	for _, it := range live.items {
		items = append(items, it)
	}
	live.items = nil
	live.Unlock()
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Go(func() {
			if err := it.stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			if err := it.remove(); err != nil {
				fmt.Fprintln(os.Stderr, err)
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
