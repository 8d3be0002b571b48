package testenv

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
)

// Backend is one engine a conformance test body runs on: the embedded engine or a real
// tigerbeetle server. Each creates one per subtest.
type Backend struct {
	// Name is "embedded" or "tigerbeetle", the name of the subtest.
	Name string
	// Real is true for a real server, where time passes for real and expiry may lag by up
	// to about 100 ms.
	Real bool
	// Client is a fresh client for this subtest, closed when it ends. On a real server it
	// talks to the package's shared server (see Shared): tests see each other's data unless
	// they use their own ledgers (NewLedger), and only a few clients are connected at a time
	// (see Server), so keep the number of parallel real-server subtests small.
	Client tb.Client

	clock *embedded.ManualClock // nil on a real server
}

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
// ledger.WithClock(b.Now), so that Advance moves both.
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

// Each runs f as two subtests: "embedded", always, on a fresh embedded engine whose manual
// clock starts at the current time; and "tigerbeetle", on the package's shared server
// (Shared), skipped under -short or when no binary is found. The package's TestMain must
// call Main.
func Each(t *testing.T, f func(t *testing.T, b *Backend)) {
	t.Helper()
	t.Run("embedded", func(t *testing.T) {
		clock := embedded.NewManualClock(time.Now())
		engine := embedded.New(embedded.WithClock(clock))
		t.Cleanup(engine.Close)
		f(t, &Backend{Name: "embedded", Client: engine, clock: clock})
	})
	t.Run("tigerbeetle", func(t *testing.T) {
		srv := Shared(t)
		f(t, &Backend{Name: "tigerbeetle", Real: true, Client: srv.Client(t)})
	})
}
