package serve

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// With OTEL_TRACES_EXPORTER=console, serve writes the spans of its calls
// and of their TigerBeetle requests to stdout, all of them by the time it
// returns after its context ended.
func TestServeTracesToConsole(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	path := filepath.Join(t.TempDir(), "rl.yaml")
	const yaml = "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 10}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	ready := make(chan string, 1)
	var out bytes.Buffer
	opts := &serveOptions{Config: path, GRPCAddr: "", HTTPAddr: "127.0.0.1:0", Unavailable: "error",
		MaxWaiting: 16, ShutdownTimeout: 10 * time.Second, ReloadInterval: time.Hour, Out: &out, ErrOut: io.Discard,
		Open: func(_ io.Writer, lopts ...ledger.Option) (*ledger.Client, func(), error) {
			c := ledger.New(embedded.New(), lopts...)
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
		t.Fatalf("serveRun = %v before serving", err)
	}
	resp, err := http.Post("http://"+addr+"/json", "application/json",
		strings.NewReader(`{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	stop()
	if err := <-served; err != nil {
		t.Fatalf("serveRun after its context ended = %v", err)
	}
	for _, want := range []string{`"Name":"POST /json"`, `"Name":"tigerbeetle create_transfers"`, `"Value":"tblimit"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %s:\n%s", want, out.String())
		}
	}
}
