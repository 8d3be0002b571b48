package root

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/cmd/tblimit/resources"
	"github.com/tblimit/tblimit/cmd/tblimit/users"
)

func TestResourcesMigrate(t *testing.T) {
	e := newEnv(t)
	e.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1m", "--limit", "5", "--lazy")
	e.ok("users", "add", "api", "bob", "--limit", "9")
	for range 3 {
		e.code(cmdutil.ExitOK, "acquire", "api", "alice")
	}
	e.code(cmdutil.ExitOK, "acquire", "api", "bob", "2")
	e.ok("resources", "create", "api2", "--kind", "requests", "--ledger", "2", "--window", "1h", "--limit", "3", "--lazy")
	var m resources.MigrateJSON
	e.json(cmdutil.ExitOK, &m, "resources", "migrate", "api", "api2")
	if m.Users != 2 || m.Carried != 4 || m.CarriedUnits != 5 {
		t.Fatalf("migrate = %+v, want 2 users and 5 units in 4 holds carried", m)
	}
	e.json(cmdutil.ExitOK, &m, "resources", "migrate", "api", "api2")
	if m.Users != 2 || m.Carried != 0 {
		t.Fatalf("migrate again = %+v, want nothing carried twice", m)
	}
	var bob, alice users.UserJSON
	e.json(cmdutil.ExitOK, &bob, "users", "show", "api2", "bob")
	e.json(cmdutil.ExitOK, &alice, "users", "show", "api2", "alice")
	if bob.Limit != 9 || bob.InFlight != 2 || alice.Limit != 3 || alice.InFlight != 3 {
		t.Fatalf("on api2: bob %+v, alice %+v; want bob's own limit 9 with 2 carried, alice api2's default 3 with 3", bob, alice)
	}
	e.code(cmdutil.ExitDenied, "acquire", "api2", "alice")
	e.clock.Advance(time.Minute + 2*time.Second) // api's window: the carried units return
	e.code(cmdutil.ExitOK, "acquire", "api2", "alice")
	e.code(cmdutil.ExitError, "resources", "migrate", "api", "nope")
	e.code(cmdutil.ExitUsage, "resources", "migrate", "api")
}
