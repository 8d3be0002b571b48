package audit

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

func TestAuditParsing(t *testing.T) {
	cmdtest.CheckParse(t, NewCmdAudit, []cmdtest.ParseCase[auditOptions]{
		{Args: []string{"api"}, Want: auditOptions{Resource: "api"}},
		{Args: []string{"api", "alice", "--since", "2h"}, Want: auditOptions{Resource: "api", User: "alice", Since: &cmdutil.When{Ago: 2 * time.Hour}}},
		{Args: []string{"api", "alice", "bob"}, Err: "accepts between 1 and 2 arg(s)"},
		{Args: []string{"api", "\talice"}, Err: "USER: "},
		{Args: []string{"api", "--until", "then"}, Err: `--until "then"`},
		{Args: []string{}, Err: "accepts between 1 and 2 arg(s)"},
	})
}

// audit runs on its dependencies: an in-memory ledger, a buffer, a
// clock.
func TestAuditRun(t *testing.T) {
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
	var out, errOut bytes.Buffer
	printer := func() *cmdutil.Printer { return cmdutil.NewPrinter(&out, true) }
	if err := auditRun(t.Context(), &auditOptions{Connect: connect, Printer: printer, ErrOut: &errOut, Now: clock.Now, Resource: "api"}); err != nil {
		t.Fatalf("audit = %v", err)
	}
	var a JSON
	if err := json.Unmarshal(out.Bytes(), &a); err != nil || !a.OK || len(a.Users) != 1 || a.Users[0].MostInWindow != 2 || errOut.Len() != 0 {
		t.Fatalf("audit = %s, %v, stderr %q; want alice with 2 in a window, ok", out.Bytes(), err, errOut.String())
	}
	// Another program takes alice's units for one second instead of a
	// window: they come back early, and a window holds more than the limit.
	cmdtest.ShortHold(t, engine, r, "alice", 2)
	clock.Advance(2 * time.Second)
	if _, err := c.Acquire(t.Context(), r, ledger.Request{User: "alice", Amount: 2}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := auditRun(t.Context(), &auditOptions{Connect: connect, Printer: printer, ErrOut: &errOut, Now: clock.Now, Resource: "api", User: "alice"}); err != overLimit {
		t.Fatalf("audit of a user over its limit = %v, want exit %d", err, cmdutil.ExitOverLimit)
	}
	if err := json.Unmarshal(out.Bytes(), &a); err != nil || a.OK || a.Users[0].OK || a.Users[0].MostInWindow != 4 || len(a.Users[0].Over) == 0 {
		t.Fatalf("audit = %s, %v; want alice over, with 4 in a window", out.Bytes(), err)
	}
}
