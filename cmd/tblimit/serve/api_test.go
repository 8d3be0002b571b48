package serve

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// With --api, tblimit.v1 is served beside Envoy's protocol on both
// listeners; without it, neither listener knows it.
func TestServeAPI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.yaml")
	if err := os.WriteFile(path, []byte("domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{true, false} {
		grpcAddr, httpAddr, stop := serveTest(t, path, on)
		resp, err := http.Post("http://"+httpAddr+"/v1/acquire", "application/json", strings.NewReader(`{"resource":"api","user":"u"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, gerr := tblimitv1.NewLimitServiceClient(conn).Acquire(ctx, &tblimitv1.AcquireRequest{Resource: "api", User: "u"})
		cancel()
		conn.Close()
		stop()
		switch {
		case on && (resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"allowed":true`)):
			t.Errorf("--api: POST /v1/acquire = %d %s, want 200, allowed", resp.StatusCode, body)
		case on && (gerr != nil || !d.GetDecision().GetAllowed() || d.GetDecision().GetRemaining() != 8):
			t.Errorf("--api: Acquire = %v, %v; want allowed, 8 remaining", d, gerr)
		case !on && resp.StatusCode != http.StatusNotFound:
			t.Errorf("without --api: POST /v1/acquire = %d %s, want 404", resp.StatusCode, body)
		case !on && gerr == nil:
			t.Errorf("without --api: Acquire = %v, want an error", d)
		}
	}
}

// serveTest serves the configuration at path on an embedded engine with a
// resource "api" (10 a minute, lazy), until stop.
func serveTest(t *testing.T, path string, api bool) (grpcAddr, httpAddr string, stop func()) {
	t.Helper()
	return serveWith(t, path, func(o *serveOptions) { o.API = api })
}

// serveWith is serveTest with the options set by f.
func serveWith(t *testing.T, path string, f func(*serveOptions)) (grpcAddr, httpAddr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	type addrs struct{ g, h string }
	ready := make(chan addrs, 1)
	opts := &serveOptions{Config: path, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Unavailable: "error",
		MaxWaiting: 16, ShutdownTimeout: 10 * time.Second, ReloadInterval: time.Hour, Out: io.Discard, ErrOut: io.Discard,
		Open: func(io.Writer, ...ledger.Option) (*ledger.Client, func(), error) {
			c := ledger.New(embedded.New())
			r := ledger.Resource{Name: "api", Ledger: 1, Kind: ledger.KindRequests, Window: time.Minute, DefaultLimit: 10, Lazy: true}
			if err := c.CreateResource(context.Background(), r); err != nil {
				return nil, nil, err
			}
			return c, c.Close, nil
		},
		Ready:  func(g, h string) { ready <- addrs{g, h} },
		Reload: func() (<-chan struct{}, func()) { return nil, func() {} },
	}
	f(opts)
	served := make(chan error, 1)
	go func() { served <- serveRun(ctx, opts) }()
	select {
	case a := <-ready:
		return a.g, a.h, func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("serveRun after its context ended = %v", err)
			}
		}
	case err := <-served:
		cancel()
		t.Fatalf("serveRun(%s) = %v before serving", path, err)
	}
	return "", "", nil
}

// With --api-tokens, a call needs a token the file allows; refusals are
// counted on /metrics, and a changed file is read again.
func TestServeAPITokens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rl.yaml")
	if err := os.WriteFile(path, []byte("domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens.yaml")
	writeTokens := func(src string) {
		if err := os.WriteFile(tokens, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeTokens("tokens:\n  - {name: svc, token: t0k3n, allow: {decide: [api]}}\n")
	grpcAddr, httpAddr, stop := serveWith(t, path, func(o *serveOptions) {
		o.API, o.APITokens, o.ReloadInterval = true, tokens, 20*time.Millisecond
	})
	defer stop()
	post := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/v1/acquire", strings.NewReader(`{"resource":"api","user":"u"}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(""); got != http.StatusUnauthorized {
		t.Errorf("POST /v1/acquire without a token = %d, want 401", got)
	}
	if got := post("t0k3n"); got != http.StatusOK {
		t.Errorf("POST /v1/acquire with the token = %d, want 200", got)
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = tblimitv1.NewLimitServiceClient(conn).Acquire(ctx, &tblimitv1.AcquireRequest{Resource: "api", User: "u"})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("Acquire without a token = %v, want UNAUTHENTICATED", err)
	}
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `tblimit_api_denied_total{method="Acquire",reason="no_token"} 2`; !strings.Contains(string(metrics), want) {
		t.Errorf("GET /metrics has no %s", want)
	}

	writeTokens("tokens:\n  - {name: svc, token: n3w, allow: {decide: [api]}}\n")
	deadline := time.Now().Add(10 * time.Second)
	for post("n3w") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the new token is refused 10s after the file changed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := post("t0k3n"); got != http.StatusUnauthorized {
		t.Errorf("POST /v1/acquire with the old token after the reload = %d, want 401", got)
	}
}

// --api without --config serves tblimit.v1 alone, and provisions while it
// runs: a money resource, a payer and a new payee are created, funded and
// paid with no restart. The "serving" line says what is served under
// which tokens, and a token naming an unknown resource is warned of.
func TestServeAPIAlone(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	src := "tokens:\n  - {name: ops, token: ops-secret, allow: {admin: \"*\", fund: \"*\", decide: \"*\"}}\n  - {name: typo, token: other, allow: {decide: [nosuch]}}\n"
	if err := os.WriteFile(tokens, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	log := new(cmdtest.LockedBuffer)
	grpcAddr, _, stop := serveWith(t, "", func(o *serveOptions) {
		o.API, o.APITokens, o.RequireRequestID, o.ErrOut = true, tokens, true, log
	})
	defer stop()
	for _, want := range []string{`msg=serving`, `api=on`, `tokens=2`, `require_request_id=true`,
		`msg="the API token file names a resource the cluster does not have" resource=nosuch`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log has no %s:\n%s", want, log)
		}
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := tblimitv1.NewLimitServiceClient(conn)
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer ops-secret"), 30*time.Second)
	defer cancel()
	res := &tblimitv1.Resource{Name: "usd-day", Kind: tblimitv1.Kind_KIND_MONEY, Ledger: 7, Currency: 840, Window: durationpb.New(24 * time.Hour), DefaultLimit: 100_000}
	if _, err := cl.CreateResource(ctx, &tblimitv1.CreateResourceRequest{Resource: res}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AddUsers(ctx, &tblimitv1.AddUsersRequest{Resource: "usd-day", Users: []*tblimitv1.NewUser{{Key: "alice"}, {Key: "merchant"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Fund(ctx, &tblimitv1.FundRequest{Resource: "usd-day", User: "alice", Amount: 5000, RequestId: "f1"}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.Pay(ctx, &tblimitv1.PayRequest{Resource: "usd-day", From: "alice", To: "merchant", Amount: 1200})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "request_id") {
		t.Errorf("Pay without a request_id under --require-request-id = %v, want INVALID_ARGUMENT", err)
	}
	p, err := cl.Pay(ctx, &tblimitv1.PayRequest{Resource: "usd-day", From: "alice", To: "merchant", Amount: 1200, RequestId: "order-7"})
	if err != nil || !p.GetDecision().GetAllowed() || p.GetFunds() != 3800 {
		t.Fatalf("Pay = %v, %v; want allowed, 3800 left", p, err)
	}
}
