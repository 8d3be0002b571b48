package api_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// grpcurlVersion is the grpcurl the test installs, with go install.
const grpcurlVersion = "v1.9.4"

// A client that has nothing but server reflection (grpcurl) finds the
// service and calls it.
func TestGRPCurl(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: installs grpcurl")
	}
	bin := installGRPCurl(t)
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		if b.Name != "embedded" {
			t.Skip("the API over reflection is the same on every engine")
		}
		e := start(t, b)
		r := e.resource(ledger.Resource{Window: time.Minute, DefaultLimit: 5, Lazy: true})
		list := grpcurl(t, bin, "-plaintext", e.grpc, "list")
		if !strings.Contains(list, "tblimit.v1.LimitService\n") {
			t.Fatalf("grpcurl list = %q, want tblimit.v1.LimitService in it", list)
		}
		out := grpcurl(t, bin, "-plaintext", "-d", `{"resource":"`+r.Name+`","user":"u","amount":2}`,
			e.grpc, "tblimit.v1.LimitService/Acquire")
		for _, want := range []string{`"allowed": true`, `"remaining": "3"`, `"reason": "REASON_ADMITTED"`} {
			if !strings.Contains(out, want) {
				t.Fatalf("grpcurl Acquire = %s, want %s in it", out, want)
			}
		}
	})
}

// grpcurl runs bin with args and returns its output.
func grpcurl(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("grpcurl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// unreachable is what go install says when the module proxy (or the
// network) cannot be reached.
var unreachable = regexp.MustCompile(`dial tcp|no such host|connection refused|i/o timeout|TLS handshake|proxyconnect|403 Forbidden|GOPROXY=off|network is unreachable`)

// installGRPCurl installs grpcurl at grpcurlVersion into the user's cache
// (once: later runs reuse it) and returns its path. It skips the test when
// the module cannot be fetched.
func installGRPCurl(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	gobin := filepath.Join(cache, "tblimit-test", "grpcurl-"+grpcurlVersion)
	bin := filepath.Join(gobin, "grpcurl")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/fullstorydev/grpcurl/cmd/grpcurl@"+grpcurlVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if unreachable.Match(out) || ctx.Err() != nil {
			t.Skipf("grpcurl %s could not be fetched (go install: %v):\n%s", grpcurlVersion, err, out)
		}
		t.Fatalf("go install grpcurl@%s: %v\n%s", grpcurlVersion, err, out)
	}
	return bin
}
