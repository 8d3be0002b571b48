package embedded_test

import (
	"sync/atomic"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// backend and each stand in for testenv.Backend and testenv.Each, with the
// same shape, until testenv provides them.
type backend struct {
	Name   string
	Real   bool
	Client tb.Client
	clock  *embedded.ManualClock
}

func (b *backend) Advance(t testing.TB, d time.Duration) {
	t.Helper()
	b.clock.Advance(d)
}

var ledgers atomic.Uint32

func (b *backend) NewLedger() uint32 { return 1000 + ledgers.Add(1) }

func each(t *testing.T, f func(t *testing.T, b *backend)) {
	t.Helper()
	t.Run("embedded", func(t *testing.T) {
		clock := embedded.NewManualClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		e := embedded.New(embedded.WithClock(clock))
		t.Cleanup(e.Close)
		f(t, &backend{Name: "embedded", Client: e, clock: clock})
	})
	t.Run("tigerbeetle", func(t *testing.T) {
		t.Skip("testenv.Each is not available yet")
	})
}
