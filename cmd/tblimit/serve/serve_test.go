package serve

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

func TestServeFlags(t *testing.T) {
	def := serveOptions{GRPCAddr: "127.0.0.1:8081", HTTPAddr: "127.0.0.1:8080", Unavailable: "error", MaxWaiting: 4096,
		ShutdownTimeout: 10 * time.Second, ReloadInterval: time.Second}
	with := func(f func(*serveOptions)) serveOptions { o := def; f(&o); return o }
	cmdtest.CheckParse(t, NewCmdServe, []cmdtest.ParseCase[serveOptions]{
		{Args: []string{"--config", "rl.yaml"}, Want: with(func(o *serveOptions) { o.Config = "rl.yaml" })},
		{Args: []string{"--check-config", "rl.yaml"}, Want: with(func(o *serveOptions) { o.CheckConfig = "rl.yaml" })},
		{Args: []string{"--config", "d", "--unavailable", "open", "--response-headers", "--grpc-addr", ":0", "--http-addr", ""},
			Want: with(func(o *serveOptions) {
				o.Config, o.Unavailable, o.ResponseHeaders, o.GRPCAddr, o.HTTPAddr = "d", "open", true, ":0", ""
			})},
		{Args: []string{"--config", "d", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem"},
			Want: with(func(o *serveOptions) {
				o.Config, o.TLSCert, o.TLSKey, o.TLSClientCA = "d", "c.pem", "k.pem", "ca.pem"
			})},
		{Args: []string{}, Err: "--config is required"},
		{Args: []string{"--config", "d", "--unavailable", "maybe"}, Err: `--unavailable "maybe": want error, open or closed`},
		{Args: []string{"--config", "d", "--tls-cert", "c.pem"}, Err: "--tls-cert and --tls-key go together"},
		{Args: []string{"--config", "d", "--tls-client-ca", "ca.pem"}, Err: "--tls-client-ca needs --tls-cert"},
		{Args: []string{"--config", "d", "--max-waiting", "0"}, Err: "--max-waiting 0: must be positive"},
		{Args: []string{"--config", "d", "--grpc-addr", "", "--http-addr", ""}, Err: "nothing to serve"},
		{Args: []string{"--config", "d", "extra"}, Err: "unknown command"},
	})
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

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	ready := make(chan string, 1)
	opts := &serveOptions{Config: path, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Unavailable: "error",
		MaxWaiting: 16, ShutdownTimeout: 10 * time.Second, ReloadInterval: time.Hour, Out: io.Discard, ErrOut: io.Discard,
		Open: func(...ledger.Option) (*ledger.Client, func(), error) {
			c := ledger.New(embedded.New())
			return c, c.Close, nil
		},
		Ready:  func(_, httpAddr string) { ready <- httpAddr },
		Reload: func() (<-chan struct{}, func()) { return nil, func() {} },
	}
	served := make(chan error, 1)
	go func() { served <- serveRun(ctx, opts) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-served:
		t.Fatalf("serveRun(%s) = %v before serving", path, err)
	}
	resp, err := http.Get("http://" + addr + "/rlconfig")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-served; err != nil {
		t.Errorf("serveRun after its context ended = %v", err)
	}

	loaded := regexp.MustCompile(`, loaded \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n`)
	if !loaded.Match(body) {
		t.Errorf("GET /rlconfig = %q, want it to say when the configuration was loaded", body)
	}
	if got, want := string(loaded.ReplaceAll(body, []byte("\n"))), checked.String(); got != want {
		t.Errorf("GET /rlconfig, but for when it was loaded, =\n%s\nserve --check-config =\n%s\nwant the same", got, want)
	}
}
