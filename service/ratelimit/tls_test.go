package ratelimit_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/service/ratelimit"
)

// pki is a CA and what it signed, as PEM files in a directory.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	serial int64
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.write(t, "ca.pem", "CERTIFICATE", der)
	return p
}

func (p *pki) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue writes a certificate and key signed by the CA, for a server on
// 127.0.0.1 or for a client, and returns its serial number.
func (p *pki) issue(t *testing.T, name string, server bool) int64 {
	t.Helper()
	p.serial++
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	p.write(t, name+"-key.pem", "EC PRIVATE KEY", kder)
	p.write(t, name+".pem", "CERTIFICATE", der)
	return p.serial
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	first := p.issue(t, "server", true)
	p.issue(t, "client", false)
	files := &ratelimit.TLSFiles{Cert: p.path("server.pem"), Key: p.path("server-key.pem"), ClientCA: p.path("ca.pem")}
	tlsCfg, err := files.Config()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := ratelimit.New(ledger.New(embedded.New()))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ratelimit.ParseConfig([]string{"t.yaml"}, map[string][]byte{"t.yaml": []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 9}\n")})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Load(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	srv, err := ratelimit.NewServer(svc, ratelimit.ServerOptions{TLS: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	gl, _ := net.Listen("tcp", "127.0.0.1:0")
	hl, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(gl, hl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})

	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	clientCert, err := tls.LoadX509KeyPair(p.path("client.pem"), p.path("client-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	// served is the serial of the certificate the server shows a client
	// with certs, and the error of a call over gRPC.
	served := func(certs []tls.Certificate) (int64, error) {
		t.Helper()
		var serial int64
		cc := &tls.Config{RootCAs: roots, Certificates: certs, VerifyConnection: func(cs tls.ConnectionState) error {
			serial = cs.PeerCertificates[0].SerialNumber.Int64()
			return nil
		}}
		conn, err := grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cc)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = rls.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rls.RateLimitRequest{Domain: "d",
			Descriptors: []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}})
		return serial, err
	}
	if serial, err := served([]tls.Certificate{clientCert}); err != nil || serial != first {
		t.Fatalf("a client with a certificate: served certificate %d, error %v; want %d, nil", serial, err, first)
	}
	if _, err := served(nil); err == nil {
		t.Errorf("a client without a certificate was answered")
	}
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}}}}).Get("https://" + hl.Addr().String() + "/healthcheck")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /healthcheck over mutual TLS = %v, %v", resp, err)
	}
	resp.Body.Close()

	// A rotated certificate is served to new connections without a restart.
	time.Sleep(1100 * time.Millisecond) // files are looked at once a second at most
	second := p.issue(t, "server", true)
	if serial, err := served([]tls.Certificate{clientCert}); err != nil || serial != second {
		t.Errorf("after rotation: served certificate %d, error %v; want %d", serial, err, second)
	}
}
