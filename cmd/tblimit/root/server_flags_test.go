package root

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
)

// --server on the command line and from the environment: an explicit
// flag wins, as for every flag; the commands that act on this machine
// refuse it, and leave $TBLIMIT_SERVER to the others.
func TestServerFlagsAndEnvironment(t *testing.T) {
	e := newEnv(t)
	noData := &cliEnv{t: t, ctx: t.Context()}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--server", "127.0.0.1:1", "tigerbeetle", "status"}, "tblimit: --server is for the commands that act through a running serve: tblimit tigerbeetle status acts on this machine"},
		{[]string{"--server", "127.0.0.1:1", "demo"}, "tblimit demo acts on this machine"},
		{[]string{"--token-file", "t", "serve", "--check-config", "x"}, "tblimit: --token-file is for the commands that act through a running serve"},
		{[]string{"--server", "127.0.0.1:1", "--addresses", "3000", "resources", "list"}, "--addresses is not for it"},
	} {
		if r := noData.code(cmdutil.ExitUsage, c.args...); !strings.Contains(r.stderr, c.want) {
			t.Errorf("tblimit %q: stderr %q, want %q", c.args, r.stderr, c.want)
		}
	}

	// A token never crosses the network in plain text.
	t.Setenv(cmdutil.TokenEnv, "ops-secret")
	if r := noData.code(cmdutil.ExitUsage, "--server", "10.0.0.5:8081", "resources", "list"); !strings.Contains(r.stderr, "give --server-ca or --server-tls") {
		t.Errorf("a token to a remote --server in plain text: stderr %q, want a usage error asking for TLS", r.stderr)
	}
	t.Setenv(cmdutil.TokenEnv, "")

	cfg := filepath.Join(t.TempDir(), "limits.yaml")
	cmdtest.WriteFile(t, cfg, "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n")
	t.Setenv("TBLIMIT_SERVER", "127.0.0.1:1")
	noData.ok("serve", "--check-config", cfg)        // serve leaves $TBLIMIT_SERVER aside
	if out := e.ok("resources", "list"); out != "" { // --data wins: the data file, empty
		t.Errorf("--data with $TBLIMIT_SERVER: resources list = %q, want none", out)
	}
	t.Setenv("TBLIMIT_DATA", e.data)
	if r := noData.code(cmdutil.ExitUsage, "resources", "list"); !strings.Contains(r.stderr, "$TBLIMIT_DATA is not for it") {
		t.Errorf("$TBLIMIT_SERVER and $TBLIMIT_DATA: stderr %q, want a usage error naming $TBLIMIT_DATA", r.stderr)
	}
	// --server wins over $TBLIMIT_DATA: it tries the server (and finds none).
	if r := noData.code(cmdutil.ExitError, "--server", "127.0.0.1:1", "resources", "list"); !strings.Contains(r.stderr, "tblimit serve at 127.0.0.1:1") {
		t.Errorf("--server with $TBLIMIT_DATA: stderr %q, want it to act through 127.0.0.1:1", r.stderr)
	}
}

// A serve with TLS is reached with --server-ca (its certificate's CA);
// plain text to it gets no answer.
func TestServerTLS(t *testing.T) {
	e := newRealTimeEnv(t)
	cert, key := selfSigned(t)
	addr := startServe(t, e, "--tls-cert", cert, "--tls-key", key)
	overTLS := &cliEnv{t: t, ctx: t.Context(), base: []string{"--server", addr, "--server-ca", cert}}
	overTLS.ok("resources", "create", "api", "--kind", "requests", "--ledger", "1", "--window", "1h", "--limit", "5")
	if out := overTLS.ok("resources", "list"); !strings.Contains(out, "api") {
		t.Errorf("resources list over TLS = %q, want api", out)
	}
	plain := &cliEnv{t: t, ctx: t.Context(), base: []string{"--server", addr}}
	if r := plain.code(cmdutil.ExitError, "resources", "list"); !strings.Contains(r.stderr, "unavailable") {
		t.Errorf("plain text to a TLS serve: stderr %q, want unavailable", r.stderr)
	}
}

// startServe runs tblimit serve --api on e's data file, with args added,
// until the test ends, and returns its gRPC address.
func startServe(t *testing.T, e *cliEnv, args ...string) string {
	t.Helper()
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	var stderr cmdtest.LockedBuffer
	exited := make(chan cmdutil.ExitCode, 1)
	go func() {
		f := cmdutil.NewFactory(strings.NewReader(""), io.Discard, &stderr)
		exited <- run(ctx, append(append(append([]string(nil), e.base...), "serve", "--api",
			"--grpc-addr", "127.0.0.1:0", "--http-addr", ""), args...), f)
	}()
	t.Cleanup(func() {
		stop()
		if code := <-exited; code != cmdutil.ExitOK {
			t.Errorf("serve = exit %d; stderr:\n%s", code, stderr.String())
		}
	})
	var addr string
	serving := regexp.MustCompile(`msg=serving grpc=(\S+)`)
	waitUntil(t, func() bool {
		m := serving.FindStringSubmatch(stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, &stderr)
	return addr
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their paths: the certificate is its own CA.
func selfSigned(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tblimit serve"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	cmdtest.WriteFile(t, cert, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	cmdtest.WriteFile(t, key, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})))
	return cert, key
}
