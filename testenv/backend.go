package testenv

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/ledger/simnet"
)

// Backend is one engine a conformance test body runs on: the embedded engine or a real
// tigerbeetle server. Each creates one per subtest.
type Backend struct {
	// Name is "embedded", "modelled" or "tigerbeetle", the name of the subtest.
	Name string
	// Real is true for the backends in real time, shared by the package's tests: a real
	// server, where expiry may lag by up to about 100 ms, and the modelled one.
	Real bool
	// Client is a fresh client for this subtest, closed when it ends. On a real server it
	// talks to the package's shared server (see Shared): tests see each other's data unless
	// they use their own ledgers (NewLedger), and only a few clients are connected at a time
	// (see Server), so keep the number of parallel real-server subtests small.
	Client tb.Client

	clock *embedded.ManualClock // nil on a real server
	run   string                // this subtest's name and a random number: see Key
}

// Key returns name made unique to this run of this subtest, for IDs derived from it
// (ledger.KeyID(b.Key("order-1"))). A transfer ID is unique across a whole cluster, and the
// shared backends outlive a test: the test's name alone is used again by go test -count=2,
// and by the next run against a long-lived server.
func (b *Backend) Key(name string) string { return b.run + "/" + name }

// Advance lets d pass: on the embedded engine it moves the engine's manual clock forward at
// once; on a real server it sleeps for d.
func (b *Backend) Advance(t testing.TB, d time.Duration) {
	t.Helper()
	if d < 0 {
		t.Fatalf("testenv: Advance(%v): negative duration", d)
	}
	if b.clock != nil {
		b.clock.Advance(d)
		return
	}
	time.Sleep(d)
}

// Now returns the engine's time: the manual clock on the embedded engine, the wall clock on
// a real server. Give it to code that compares cluster timestamps with the present, such as
// ledger.WithNow(b.Now), so that Advance moves both.
func (b *Backend) Now() time.Time {
	if b.clock != nil {
		return b.clock.Now()
	}
	return time.Now()
}

// ledgers hands out ledger numbers: unique within the process, from a random base so that
// separate runs against a long-lived server are unlikely to meet.
var ledgers struct {
	once sync.Once
	next atomic.Uint32
}

// NewLedger returns a ledger number that no other test in this process has been given, so
// that tests sharing a server do not see each other's accounts and transfers. It is never
// 0, which TigerBeetle rejects.
func (b *Backend) NewLedger() uint32 {
	ledgers.once.Do(func() { ledgers.next.Store(rand.Uint32N(1 << 31)) })
	for {
		if l := ledgers.next.Add(1); l != 0 {
			return l
		}
	}
}

// Each runs f as four subtests: "embedded", always, on a fresh embedded engine whose manual
// clock starts at the current time; "stored", always, on a fresh data file (embedded.Open)
// with the same clock, which checkpoints its store after every request and caches nothing,
// so that everything but the accounts and pending transfers is read back from disk;
// "modelled", on an embedded engine shared by every test
// of the package, as a real server is, in real time, behind the costs of a real server's
// client (simnet.RealServer0179, with the first request's registration), so that a test
// that only passes on a fresh engine, or with microsecond round trips, fails without a
// server too; and "tigerbeetle", on the package's shared server (Shared). The last two are
// Real backends, skipped under -short; the last also when no binary is found. The
// package's TestMain must call Main.
func Each(t *testing.T, f func(t *testing.T, b *Backend)) {
	t.Helper()
	t.Run("embedded", func(t *testing.T) {
		clock := embedded.NewManualClock(time.Now())
		engine := embedded.New(embedded.WithClock(clock))
		t.Cleanup(engine.Close)
		f(t, &Backend{Name: "embedded", Client: engine, clock: clock, run: runName(t)})
	})
	t.Run("stored", func(t *testing.T) {
		clock := embedded.NewManualClock(time.Now())
		file, err := embedded.Open(filepath.Join(storedDir(t), "data"), embedded.WithClock(clock),
			embedded.WithCheckpointBytes(1), embedded.WithCacheSize(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(file.Close)
		f(t, &Backend{Name: "stored", Client: file, clock: clock, run: runName(t)})
	})
	t.Run("modelled", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short: the modelled server runs in real time")
		}
		sc := simnet.New(sharedEngine(), modelledServer)
		t.Cleanup(sc.Close)
		f(t, &Backend{Name: "modelled", Real: true, Client: sc, run: runName(t)})
	})
	t.Run("tigerbeetle", func(t *testing.T) {
		srv := Shared(t)
		f(t, &Backend{Name: "tigerbeetle", Real: true, Client: srv.Client(t), run: runName(t)})
	})
}

// storedDir is a directory for the "stored" backend's data file, removed when the test
// ends: on tmpfs when there is one, where an fsync costs nothing, else t.TempDir().
func storedDir(t *testing.T) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "tblimit-stored-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func runName(t *testing.T) string { return fmt.Sprintf("%s#%016x", t.Name(), rand.Uint64()) }

// modelledServer is what the modelled backend's requests cost: a real
// 0.17.9 server's, and its first request the session's registration.
var modelledServer = func() simnet.Model {
	m := simnet.RealServer0179
	m.Name += ", registering"
	m.Register = 450 * time.Millisecond
	return m
}()

// engine is the embedded engine the modelled backend's tests share.
var engine struct {
	once sync.Once
	e    *embedded.Engine
}

// sharedEngine returns the package's shared engine, made on first use and
// closed by Main.
func sharedEngine() *embedded.Engine {
	engine.once.Do(func() {
		engine.e = embedded.New()
		track(func() error { engine.e.Close(); return nil }, func() error { return nil })
	})
	return engine.e
}

// InTime runs body with window w and, on a real server, again with twice the window (up to
// max) for as long as body returns false. body returns false when its own cluster
// timestamps (Decision.Timestamp, transfer timestamps; see Within) show that its work
// outlasted the window, so that what it was about to assert no longer follows: a slow
// machine or server then costs time, not a failure. body must use new ledgers on each run
// (NewLedger). On the embedded engine time moves only by Advance, so false fails the test.
func (b *Backend) InTime(t testing.TB, w, max time.Duration, body func(w time.Duration) bool) {
	t.Helper()
	for {
		if body(w) {
			return
		}
		if !b.Real {
			t.Fatalf("testenv: InTime: the body found its work outlasted a %v window on the embedded engine, whose clock moves only by Advance", w)
		}
		if w *= 2; w > max {
			t.Fatalf("testenv: InTime: the work outlasted a %v window", w/2)
		}
		t.Logf("testenv: InTime: the work outlasted the window; again with %v", w)
	}
}

// Within reports whether cluster timestamp to (in ns) comes less than w after from: whether
// a unit taken at from is still held at to. Real TigerBeetle frees a unit at, or shortly
// after, from+w; it never frees it earlier.
func Within(from, to uint64, w time.Duration) bool {
	return to < from+uint64(w)
}
