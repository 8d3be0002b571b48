package history

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

func TestHistoryParsing(t *testing.T) {
	day2 := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	cmdtest.CheckParse(t, NewCmdHistory, []cmdtest.ParseCase[historyOptions]{
		{Args: []string{"api", "alice"}, Want: historyOptions{Resource: "api", User: "alice", Max: 100}},
		{Args: []string{"api", "alice", "--since", "2026-01-02", "--until", "1d", "--max", "0"},
			Want: historyOptions{Resource: "api", User: "alice", Since: &cmdutil.When{At: day2}, Until: &cmdutil.When{Ago: 24 * time.Hour}}},
		{Args: []string{"api", "alice", "--since", "1d", "--until", "2026-01-02"}, Err: "--since 1d is after --until 2026-01-02"},
		{Args: []string{"api", "alice", "--since", "2026-01-02T00:00:00Z"}, Want: historyOptions{Resource: "api", User: "alice", Since: &cmdutil.When{At: day2}, Max: 100}},
		{Args: []string{"api", "alice", "--since", "soon"}, Err: `--since "soon": want a time`},
		{Args: []string{"api", "alice", "--until", "-5m"}, Err: `--until "-5m": want a time`},
		{Args: []string{"api", "alice", "--max", "-1"}, Err: "--max -1: must not be negative"},
		{Args: []string{"api", "alice", "--max", "many"}, Err: `--max "many": want a whole number`},
		{Args: []string{"api", " alice"}, Err: "USER: "},
		{Args: []string{"api"}, Err: "accepts 2 arg(s)"},
	})
}

// history runs on its dependencies: an in-memory ledger, a buffer, a
// clock.
func TestHistoryRun(t *testing.T) {
	clock := embedded.NewManualClock(time.Now())
	engine := embedded.New(embedded.WithClock(clock))
	c := ledger.New(engine)
	r := ledger.Resource{Name: "api", Kind: ledger.KindRequests, Ledger: 1, Window: time.Minute, DefaultLimit: 2, Lazy: true}
	if err := c.CreateResource(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.Acquire(t.Context(), r, ledger.Request{User: "alice", Amount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Minute)
	connect := func(context.Context) (*ledger.Client, func(), error) { return c, func() {}, nil }
	var out bytes.Buffer
	printer := func() *cmdutil.Printer { return cmdutil.NewPrinter(&out, true) }
	err := historyRun(t.Context(), &historyOptions{Connect: connect, Printer: printer, Now: clock.Now, Resource: "api", User: "alice", Since: &cmdutil.When{Ago: time.Hour}, Max: 1})
	var h JSON
	if err != nil || json.Unmarshal(out.Bytes(), &h) != nil || len(h.Admissions) != 1 || !h.More || h.Admissions[0].End != "expired" ||
		h.Since != cmdutil.RFC3339(clock.Now().Add(-time.Hour)) || h.Until != "" {
		t.Fatalf("history = %s, %v; want the newest of two admissions, expired, since an hour before the clock", out.Bytes(), err)
	}
}
