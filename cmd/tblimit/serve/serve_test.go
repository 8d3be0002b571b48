package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

func TestServeFlags(t *testing.T) {
	def := serveOptions{GRPCAddr: "127.0.0.1:8081", HTTPAddr: "127.0.0.1:8080", Unavailable: "error", MaxWaiting: 4096, UserCache: ledger.DefaultUserCache,
		ShutdownTimeout: 10 * time.Second, ReloadInterval: time.Second, LogFormat: "text", LogLevel: "info"}
	with := func(f func(*serveOptions)) serveOptions { o := def; f(&o); return o }
	cmdtest.CheckParse(t, NewCmdServe, []cmdtest.ParseCase[serveOptions]{
		{Args: []string{"--config", "rl.yaml"}, Want: with(func(o *serveOptions) { o.Config = "rl.yaml" })},
		{Args: []string{"--check-config", "rl.yaml"}, Want: with(func(o *serveOptions) { o.CheckConfig = "rl.yaml" })},
		{Args: []string{"--config", "rl.yaml", "--api"}, Want: with(func(o *serveOptions) { o.Config, o.API = "rl.yaml", true })},
		{Args: []string{"--config", "d", "--unavailable", "open", "--response-headers", "--grpc-addr", ":0", "--http-addr", ""},
			Want: with(func(o *serveOptions) {
				o.Config, o.Unavailable, o.ResponseHeaders, o.GRPCAddr, o.HTTPAddr = "d", "open", true, ":0", ""
			})},
		{Args: []string{"--config", "d", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem"},
			Want: with(func(o *serveOptions) {
				o.Config, o.TLSCert, o.TLSKey, o.TLSClientCA = "d", "c.pem", "k.pem", "ca.pem"
			})},
		{Args: []string{"--config", "d", "--log-format", "json", "--log-level", "warn"},
			Want: with(func(o *serveOptions) { o.Config, o.LogFormat, o.LogLevel = "d", "json", "warn" })},
		{Args: []string{"--config", "d", "--api", "--api-tokens", "t.yaml", "--http-addr", "0.0.0.0:8080", "--grpc-addr", ":8081"},
			Want: with(func(o *serveOptions) {
				o.Config, o.API, o.APITokens, o.HTTPAddr, o.GRPCAddr = "d", true, "t.yaml", "0.0.0.0:8080", ":8081"
			})},
		{Args: []string{"--config", "d", "--api", "--api-insecure", "--http-addr", "10.0.0.1:8080"},
			Want: with(func(o *serveOptions) { o.Config, o.API, o.APIInsecure, o.HTTPAddr = "d", true, true, "10.0.0.1:8080" })},
		{Args: []string{"--config", "d", "--api", "--http-addr", "[::1]:8080", "--grpc-addr", "localhost:8081"},
			Want: with(func(o *serveOptions) {
				o.Config, o.API, o.HTTPAddr, o.GRPCAddr = "d", true, "[::1]:8080", "localhost:8081"
			})},
		{Args: []string{"--config", "d", "--http-addr", "0.0.0.0:8080"}, Want: with(func(o *serveOptions) { o.Config, o.HTTPAddr = "d", "0.0.0.0:8080" })},
		{Args: []string{"--config", "d", "--api", "--http-addr", "0.0.0.0:8080"}, Err: "--http-addr 0.0.0.0:8080 is not loopback; give --api-tokens FILE"},
		{Args: []string{"--config", "d", "--api", "--grpc-addr", ":8081"}, Err: "--grpc-addr :8081 is not loopback"},
		{Args: []string{"--config", "d", "--api", "--grpc-addr", "[::]:8081"}, Err: "--grpc-addr [::]:8081 is not loopback"},
		{Args: []string{"--config", "d", "--api", "--http-addr", "tblimit.internal:8080"}, Err: "--http-addr tblimit.internal:8080 is not loopback"},
		{Args: []string{"--config", "d", "--api-tokens", "t.yaml"}, Err: "--api-tokens, --api-insecure and --require-request-id need --api"},
		{Args: []string{"--config", "d", "--require-request-id"}, Err: "--require-request-id need --api"},
		{Args: []string{}, Err: "--config is required"},
		{Args: []string{"--api", "--require-request-id"}, Want: with(func(o *serveOptions) { o.API, o.RequireRequestID = true, true })},
		{Args: []string{"--config", "d", "--log-format", "logfmt"}, Err: `--log-format "logfmt": want text or json`},
		{Args: []string{"--config", "d", "--log-level", "WARN"}, Err: `--log-level "WARN": want debug, info, warn or error`},
		{Args: []string{"--config", "d", "--unavailable", "maybe"}, Err: `--unavailable "maybe": want error, open or closed`},
		{Args: []string{"--config", "d", "--tls-cert", "c.pem"}, Err: "--tls-cert and --tls-key go together"},
		{Args: []string{"--config", "d", "--tls-client-ca", "ca.pem"}, Err: "--tls-client-ca needs --tls-cert"},
		{Args: []string{"--config", "d", "--max-waiting", "0"}, Err: "--max-waiting 0: must be positive"},
		{Args: []string{"--config", "d", "--user-cache", "0"}, Err: "--user-cache 0: must be positive"},
		{Args: []string{"--config", "d", "--user-cache", "1000000"}, Want: with(func(o *serveOptions) { o.Config, o.UserCache = "d", 1_000_000 })},
		{Args: []string{"--config", "d", "--grpc-addr", "", "--http-addr", ""}, Err: "nothing to serve"},
		{Args: []string{"--config", "d", "extra"}, Err: "unknown command"},
	})

	// From the environment, as the other flags; an explicit flag wins.
	t.Setenv("TBLIMIT_LOG_FORMAT", "json")
	t.Setenv("TBLIMIT_LOG_LEVEL", "debug")
	cmdtest.CheckParse(t, NewCmdServe, []cmdtest.ParseCase[serveOptions]{
		{Args: []string{"--config", "d"}, Want: with(func(o *serveOptions) { o.Config, o.LogFormat, o.LogLevel = "d", "json", "debug" })},
		{Args: []string{"--config", "d", "--log-level", "error"},
			Want: with(func(o *serveOptions) { o.Config, o.LogFormat, o.LogLevel = "d", "json", "error" })},
	})
	t.Setenv("TBLIMIT_LOG_LEVEL", "verbose")
	cmdtest.CheckParse(t, NewCmdServe, []cmdtest.ParseCase[serveOptions]{
		{Args: []string{"--config", "d"}, Err: `--log-level "verbose": want debug, info, warn or error`},
	})
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.2:0": true, "[::1]:8081": true, "localhost:8080": true, "LOCALHOST:1": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.1.2.3:80": false, "example.com:80": false, "[::ffff:127.0.0.1]:1": true,
		"127.0.0.1": false, "": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// --check-config prints a configuration as GET /rlconfig shows it once
// served, but for when it was loaded.
func TestCheckConfigPrintsRLConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.yaml")
	const yaml = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unlimited: true}
  - key: api_key
    descriptors:
      - key: path
        shadow_mode: true
        rate_limit: {unit: hour, requests_per_unit: 100, name: per_path, replaces: [{name: other}]}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var checked bytes.Buffer
	if err := checkConfig(&serveOptions{CheckConfig: path, Out: &checked}); err != nil {
		t.Fatalf("checkConfig(%s) = %v", path, err)
	}

	s := serveFor(t, path, io.Discard, nil)
	body := []byte(s.get("/rlconfig"))
	s.stop()

	loaded := regexp.MustCompile(`, loaded \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n`)
	if !loaded.Match(body) {
		t.Errorf("GET /rlconfig = %q, want it to say when the configuration was loaded", body)
	}
	if got, want := string(loaded.ReplaceAll(body, []byte("\n"))), checked.String(); got != want {
		t.Errorf("GET /rlconfig, but for when it was loaded, =\n%s\nserve --check-config =\n%s\nwant the same", got, want)
	}
}

// serving is a tblimit serve on loopback and the embedded engine, for one
// test.
type serving struct {
	t      *testing.T
	url    string        // the HTTP listener's, http://host:port
	reload chan struct{} // delivers a SIGHUP
	stop   func()        // ends it, and fails the test unless serveRun returns nil
}

// serveFor runs serveRun on the configuration at path, logging to errOut,
// with the options of a test that mod, when not nil, changes; it returns
// once the service serves.
func serveFor(t *testing.T, path string, errOut io.Writer, mod func(*serveOptions)) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	s := &serving{t: t, reload: make(chan struct{}, 1)}
	opts := &serveOptions{Config: path, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Unavailable: "error",
		MaxWaiting: 16, ShutdownTimeout: 10 * time.Second, ReloadInterval: time.Hour, LogFormat: "text", LogLevel: "info",
		Out: io.Discard, ErrOut: errOut,
		Open: func(io.Writer, ...ledger.Option) (*ledger.Client, func(), error) {
			c := ledger.New(embedded.New())
			return c, c.Close, nil
		},
		Ready:  func(_, httpAddr string) { ready <- httpAddr },
		Reload: func() (<-chan struct{}, func()) { return s.reload, func() {} },
	}
	if mod != nil {
		mod(opts)
	}
	served := make(chan error, 1)
	go func() { served <- serveRun(ctx, opts) }()
	select {
	case addr := <-ready:
		s.url = "http://" + addr
	case err := <-served:
		cancel()
		t.Fatalf("serveRun(%s) = %v before serving", path, err)
	}
	stopped := false
	s.stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serveRun after its context ended = %v", err)
		}
	}
	t.Cleanup(s.stop)
	return s
}

// get returns the body of GET path, which must answer 200.
func (s *serving) get(path string) string {
	s.t.Helper()
	resp, err := http.Get(s.url + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET %s = %d %s, %v", path, resp.StatusCode, body, err)
	}
	return string(body)
}

// post POSTs a RateLimitRequest in JSON to /json and returns the status.
func (s *serving) post(request string) int {
	s.t.Helper()
	resp, err := http.Post(s.url+"/json", "application/json", strings.NewReader(request))
	if err != nil {
		s.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// The log is text (key=value, the default) or JSON lines, each record with
// its level and message, from --log-level up: at warn, the refused
// configuration's error stays and the info lines go.
func TestServeLog(t *testing.T) {
	const good = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"
	for _, c := range []struct {
		format, level string
		want, not     []string // in the log, or not
	}{
		{"text", "info", []string{`level=INFO msg=serving grpc=127.0.0.1:`, `level=ERROR msg="configuration refused`, `rl.yaml:4: requests_per_unit`}, nil},
		{"json", "info", []string{`"level":"INFO","msg":"serving","grpc":"127.0.0.1:`, `"level":"ERROR","msg":"configuration refused`}, nil},
		{"json", "warn", []string{`"level":"ERROR","msg":"configuration refused`}, []string{`"level":"INFO"`, `"msg":"serving"`}},
		{"text", "error", []string{`level=ERROR msg="configuration refused`}, []string{`level=INFO`, `msg=serving`}},
	} {
		t.Run(c.format+"/"+c.level, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rl.yaml")
			cmdtest.WriteFile(t, path, good)
			var log cmdtest.LockedBuffer
			s := serveFor(t, path, &log, func(o *serveOptions) { o.LogFormat, o.LogLevel = c.format, c.level })
			cmdtest.WriteFile(t, path, strings.Replace(good, "10", "ten", 1))
			s.reload <- struct{}{}
			waitFor(t, func() bool { return strings.Contains(log.String(), "configuration refused") }, &log)
			s.stop()
			out := log.String()
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("--log-format %s --log-level %s: log\n%s\nwant %s", c.format, c.level, out, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(out, n) {
					t.Errorf("--log-format %s --log-level %s: log\n%s\nwant no %s", c.format, c.level, out, n)
				}
			}
			if c.format == "json" {
				checkJSONLines(t, out)
			}
		})
	}
}

// checkJSONLines fails unless every line of log is a JSON object with a
// level and a message.
func checkJSONLines(t *testing.T, log string) {
	t.Helper()
	for line := range strings.Lines(log) {
		var rec struct {
			Level, Msg string
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Level == "" || rec.Msg == "" {
			t.Errorf("log line %q: %v; want a JSON object with a level and a msg", line, err)
		}
	}
}

// The embedded engine's notices and warnings, lines of their own on a
// terminal, are records of serve's log.
func TestNoticesAreLogged(t *testing.T) {
	var log bytes.Buffer
	w := noticeLog{newLogger(&log, "json", "info")}
	io.WriteString(w, "tblimit: warning: the process holds 40 MiB, 62% of its bound\n")
	io.WriteString(w, "tblimit: notice: replaying the journal x (2 GiB): about 20s\n")
	checkJSONLines(t, log.String())
	for _, want := range []string{`"level":"WARN","msg":"the process holds 40 MiB, 62% of its bound"`,
		`"level":"INFO","msg":"replaying the journal x (2 GiB): about 20s"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log\n%s\nwant %s", log.String(), want)
		}
	}
}

// waitFor polls cond for up to 20 s, printing the log if it never holds.
func waitFor(t *testing.T, cond func() bool, log *cmdtest.LockedBuffer) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out; log:\n%s", log.String())
		}
	}
}
