package root

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/cmd/tblimit/serve"
	"github.com/tblimit/tblimit/cmd/tblimit/tigerbeetle"
	"github.com/tblimit/tblimit/internal/launch"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/testenv/fake"
)

// envMain makes the test binary run as the tblimit command: the kill -9 and
// two-process tests, and tigerbeetle up, re-execute it that way.
const envMain = "TBLIMIT_CLI_TEST_MAIN"

// envFakeProbe makes tigerbeetle serve, in this test binary, accept a fake
// tigerbeetle (see package fake) as answering once it accepts connections.
const envFakeProbe = "TBLIMIT_CLI_TEST_FAKE_PROBE"

// envHung makes the test binary play a tigerbeetle server that runs but
// never answers; see hungServer.
const envHung = "TBLIMIT_CLI_TEST_HUNG"

func TestMain(m *testing.M) {
	fake.Serve()
	if os.Getenv(envFakeProbe) == "1" {
		tigerbeetle.LaunchOptions = append(tigerbeetle.LaunchOptions, launch.WithProbe(fake.DialProbe))
	}
	if os.Getenv(envHung) == "1" {
		os.Exit(hungServer())
	}
	if os.Getenv(envFleet) != "" {
		os.Exit(fleetMember(os.Getenv(envFleet)))
	}
	if os.Getenv(envMain) == "1" {
		os.Exit(int(Main()))
	}
	// The tests say what they connect to; a developer's settings must not
	// send them to a cluster.
	for _, name := range append(cmdutil.EnvFlags, serve.EnvFlags...) {
		os.Unsetenv(cmdutil.EnvName(name))
	}
	os.Exit(m.Run())
}

// cliEnv runs tblimit in-process against one data file.
type cliEnv struct {
	t     *testing.T
	ctx   context.Context
	data  string
	clock *embedded.ManualClock // nil: real time
	base  []string              // flags before every command: --data or --addresses
}

// newEnv returns an environment with a fresh data file whose engine runs on
// a manual clock.
func newEnv(t *testing.T) *cliEnv {
	t.Helper()
	e := newRealTimeEnv(t)
	e.clock = embedded.NewManualClock(time.Now())
	return e
}

// newRealTimeEnv returns an environment with a fresh data file on the
// system clock.
func newRealTimeEnv(t *testing.T) *cliEnv {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data.journal")
	return &cliEnv{t: t, ctx: t.Context(), data: data, base: []string{"--data", data}}
}

type result struct {
	stdout, stderr string
	code           cmdutil.ExitCode
}

func (e *cliEnv) run(args ...string) result {
	e.t.Helper()
	return e.runIn("", args...)
}

func (e *cliEnv) runIn(stdin string, args ...string) result {
	e.t.Helper()
	var out, errb bytes.Buffer
	f := cmdutil.NewFactory(strings.NewReader(stdin), &out, &errb)
	if e.clock != nil {
		f.Clock = e.clock
	}
	code := run(e.ctx, append(append([]string(nil), e.base...), args...), f)
	return result{out.String(), errb.String(), code}
}

// ok runs a command that must succeed and returns its standard output.
func (e *cliEnv) ok(args ...string) string {
	e.t.Helper()
	r := e.run(args...)
	if r.code != cmdutil.ExitOK {
		e.t.Fatalf("tblimit %s = exit %d, want 0; stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	if r.stderr != "" {
		e.t.Fatalf("tblimit %s wrote on stderr:\n%s", strings.Join(args, " "), r.stderr)
	}
	return r.stdout
}

// code runs a command and checks its exit code.
func (e *cliEnv) code(want cmdutil.ExitCode, args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != want {
		e.t.Fatalf("tblimit %s = exit %d, want %d; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
	}
	return r
}

// json runs a command with -o json that must exit with code want, and
// decodes its output into v.
func (e *cliEnv) json(want cmdutil.ExitCode, v any, args ...string) {
	e.t.Helper()
	r := e.code(want, append([]string{"-o", "json"}, args...)...)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		e.t.Fatalf("tblimit -o json %s: %v; output:\n%s", strings.Join(args, " "), err, r.stdout)
	}
}

// dataBytes returns the data file's contents, to check that nothing was
// written.
func (e *cliEnv) dataBytes() []byte {
	e.t.Helper()
	b, err := os.ReadFile(e.data)
	if err != nil && !os.IsNotExist(err) {
		e.t.Fatal(err)
	}
	return b
}
