package cmdutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
)

// TokenEnv is the environment variable of the bearer token --server sends
// (a token never goes on a command line, where ps shows it).
const TokenEnv = "TBLIMIT_TOKEN"

// openServer returns a Client whose cluster is the one a running tblimit
// serve at g.Server uses, reached through its tblimit.v1.LedgerService: on
// the embedded default, the data file serve holds. The caller calls the
// returned function when done.
func (g *GlobalOptions) openServer(opts ...ledger.Option) (*ledger.Client, func(), error) {
	creds := insecure.NewCredentials()
	switch {
	case g.ServerCA != "":
		pem, err := os.ReadFile(g.ServerCA)
		if err != nil {
			return nil, nil, fmt.Errorf("--server-ca: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("--server-ca %s: no PEM certificate in it", g.ServerCA)
		}
		creds = credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	case g.ServerTLS:
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	token, err := g.token()
	if err != nil {
		return nil, nil, err
	}
	if token != "" && g.ServerCA == "" && !g.ServerTLS && !Loopback(g.Server) {
		return nil, nil, Usagef("--server %s is not loopback: give --server-ca or --server-tls, or the token (admin on \"*\") would cross the network in plain text", g.Server)
	}
	cc, err := grpc.NewClient(g.Server, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, nil, Usagef("--server %s: %v", g.Server, err)
	}
	ls := tblimitv1.NewLedgerServiceClient(cc)
	forward := func(ctx context.Context, op ledger.Operation, events []byte) ([]byte, error) {
		// TigerBeetle's client has no context, so the forwarded Client
		// calls with none; the call's deadline is --timeout's. Serve then
		// answers UNAVAILABLE while the command still waits
		// (service.AnswerBefore) when its cluster is slow, and a serve
		// that never answers does not hold the call for ever.
		ctx, cancel := context.WithTimeout(ctx, g.Timeout)
		defer cancel()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		resp, err := ls.Submit(ctx, &tblimitv1.SubmitRequest{Operation: tblimitv1.Operation(op), Events: events})
		if err != nil {
			return nil, g.serverError(err)
		}
		return resp.GetResults(), nil
	}
	return ledger.NewForwarded(forward, opts...), func() { cc.Close() }, nil
}

// token is the bearer token to send: $TBLIMIT_TOKEN, or --token-file's
// first line; "" for none.
func (g *GlobalOptions) token() (string, error) {
	if g.TokenFile == "" {
		return strings.TrimSpace(os.Getenv(TokenEnv)), nil
	}
	b, err := os.ReadFile(g.TokenFile)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", fmt.Errorf("--token-file %s: no token in it", g.TokenFile)
	}
	return tok, nil
}

// errServer means tblimit serve refused an operation it was sent.
var errServer = errors.New("refused")

// serverError is the error of a call that tblimit serve failed: what the
// library makes of it (unavailable, a request too large) or the server's
// words, with what the user can do about it.
func (g *GlobalOptions) serverError(err error) error {
	st := status.Convert(err)
	var reason string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.GetReason()
		}
	}
	switch {
	case st.Code() == codes.Unavailable || st.Code() == codes.ResourceExhausted:
		return fmt.Errorf("%w: tblimit serve at %s: %s", ledger.ErrUnavailable, g.Server, st.Message())
	case reason == "TOO_MANY":
		return fmt.Errorf("%w: %s", ledger.ErrTooMany, st.Message())
	case st.Code() == codes.Unauthenticated:
		return Hint(fmt.Errorf("tblimit serve at %s %w the call: %s", g.Server, errServer, st.Message()),
			"set $%s to a token that its --api-tokens file allows admin on \"*\", or give --token-file", TokenEnv)
	case st.Code() == codes.PermissionDenied:
		return Hint(fmt.Errorf("tblimit serve at %s %w the call: %s", g.Server, errServer, st.Message()),
			"the CLI acts on everything through serve: its token needs admin on \"*\"")
	case st.Code() == codes.Unimplemented:
		return Hint(fmt.Errorf("tblimit serve at %s %w the call: %s", g.Server, errServer, st.Message()),
			"is it serving tblimit's API? start it with --api")
	}
	return fmt.Errorf("tblimit serve at %s: %s", g.Server, st.Message())
}

// Loopback reports whether addr (host:port) is on loopback only:
// 127.0.0.1:x (any of 127/8), [::1]:x or localhost:x; not :x, 0.0.0.0:x,
// [::]:x (every interface) or any other host.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
