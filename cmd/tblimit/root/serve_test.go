package root

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/service/ratelimit"
)

func TestServeCheckConfig(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	cmdtest.WriteFile(t, good, "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n")
	if out := e.ok("serve", "--check-config", good); !regexp.MustCompile(`api\.user: unit=minute requests_per_unit=10 resource=rl[a-z2-7]{10} ledger=\d+ \(` + regexp.QuoteMeta(good) + `:4\)`).MatchString(out) {
		t.Errorf("serve --check-config good = %q, want the rule and its line", out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	cmdtest.WriteFile(t, bad, "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: ten}\n")
	r := e.code(cmdutil.ExitUsage, "serve", "--check-config", bad)
	if want := bad + ":4: requests_per_unit"; !strings.Contains(r.stderr, want) {
		t.Errorf("serve --check-config bad: stderr %q, want %q", r.stderr, want)
	}
}

func TestServeEndToEnd(t *testing.T) {
	e := newRealTimeEnv(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "limits.yaml")
	const yaml = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: %s}\n"
	cmdtest.WriteFile(t, cfg, strings.Replace(yaml, "%s", "3", 1))

	ctx, stop := context.WithCancel(t.Context())
	var stderr cmdtest.LockedBuffer
	exited := make(chan cmdutil.ExitCode, 1)
	go func() {
		f := cmdutil.NewFactory(strings.NewReader(""), io.Discard, &stderr)
		exited <- run(ctx, append(e.base, "serve", "--config", dir, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
			"--reload-interval", "20ms"), f)
	}()
	var grpcAddr, httpAddr string
	serving := regexp.MustCompile(`msg=serving grpc=(\S+) http=(\S+)`)
	waitUntil(t, func() bool {
		m := serving.FindStringSubmatch(stderr.String())
		if m != nil {
			grpcAddr, httpAddr = m[1], "http://"+m[2]
		}
		return m != nil
	}, &stderr)

	c, err := ratelimit.Dial(grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := c.Limiter("api", "user")
	allow := func(want bool) {
		t.Helper()
		r, err := l.Allow(t.Context(), "alice")
		if err != nil || r.Allowed != want {
			t.Fatalf("Allow(alice) = %+v, %v; want allowed %v", r, err, want)
		}
	}
	for range 3 {
		allow(true)
	}
	allow(false)

	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// Raised in the file: in force without a restart, the units in flight kept.
	cmdtest.WriteFile(t, cfg, strings.Replace(yaml, "%s", "5", 1))
	waitUntil(t, func() bool { return strings.Contains(get("/rlconfig"), "requests_per_unit=5") }, &stderr)
	allow(true)
	allow(true)
	allow(false)

	// A second serve on the embedded engine's data file says why it cannot.
	r := e.code(cmdutil.ExitError, "serve", "--config", dir, "--grpc-addr", "127.0.0.1:0", "--http-addr", "")
	if !strings.Contains(r.stderr, "one process at a time") || !strings.Contains(r.stderr, "--addresses") {
		t.Errorf("a second serve: stderr %q, want it to say the data file serves one process and to use --addresses", r.stderr)
	}

	// A bad file is refused, counted, and the last good one stays.
	cmdtest.WriteFile(t, cfg, strings.Replace(yaml, "%s", "-1", 1))
	// The error is counted before it is logged: wait for both.
	waitUntil(t, func() bool {
		return strings.Contains(get("/metrics"), `tblimit_ratelimit_config_loads_total{result="error"} 1`) &&
			strings.Contains(stderr.String(), "limits.yaml:4: requests_per_unit")
	}, &stderr)
	if !strings.Contains(get("/rlconfig"), "requests_per_unit=5") {
		t.Errorf("after a bad file: /rlconfig %q, stderr %q; want the last good configuration and the file:line", get("/rlconfig"), stderr.String())
	}

	stop()
	select {
	case code := <-exited:
		if code != cmdutil.ExitOK || !strings.Contains(stderr.String(), "shutting down") {
			t.Errorf("serve after its context ended = exit %d, stderr %q; want 0 and a drain", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
}

// waitUntil polls cond for up to 20 s, printing out if it never holds.
func waitUntil(t *testing.T, cond func() bool, out *cmdtest.LockedBuffer) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out; stderr:\n%s", out.String())
		}
	}
}

// A serve whose process is past its memory bound says so, with what to
// do, and refuses new decisions rather than growing until the machine
// kills it: here from the start, so that its rules cannot be loaded.
func TestServePastMemoryBound(t *testing.T) {
	e := newRealTimeEnv(t)
	dir := t.TempDir()
	cmdtest.WriteFile(t, filepath.Join(dir, "limits.yaml"), "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n")
	// Any process holds more than 64 KiB of live heap.
	r := e.code(cmdutil.ExitError, "serve", "--config", dir, "--grpc-addr", "127.0.0.1:0", "--http-addr", "", "--max-memory", "64KiB")
	for _, want := range []string{"past its bound (--max-memory 64 KiB)", "refusing new decisions", "tblimit tigerbeetle up", "create requests refused"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q: want %q", r.stderr, want)
		}
	}
	if r := e.code(cmdutil.ExitUsage, "serve", "--config", dir, "--max-memory", "lots"); !strings.Contains(r.stderr, `--max-memory "lots": want a size`) {
		t.Errorf("--max-memory lots: stderr %q", r.stderr)
	}
}
