package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/service/api"
	"github.com/tblimit/tblimit/testenv"
)

// The tokens of TestTokens: an operator's (every permission, every
// resource) and a service's that may only decide on one resource.
const (
	opsToken      = "ops-0f6c1d2e"
	checkoutToken = "checkout-9a8b7c6d"
)

// writeTokens writes a token file and loads it.
func writeTokens(t *testing.T, src string) (*api.Tokens, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := api.LoadTokens(path)
	if err != nil {
		t.Fatalf("LoadTokens(%s) = %v", src, err)
	}
	return toks, path
}

func sha(s string) string { h := sha256.Sum256([]byte(s)); return "sha256:" + hex.EncodeToString(h[:]) }

// as is a context whose calls send token ("": none).
func as(t *testing.T, token string) context.Context {
	if token == "" {
		return ctx(t)
	}
	return metadata.AppendToOutgoingContext(ctx(t), "authorization", "Bearer "+token)
}

// denied is tblimit_api_denied_total{reason, method} of toks.
func denied(t *testing.T, toks *api.Tokens, reason, method string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(toks)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if mf.GetName() == "tblimit_api_denied_total" && labels["reason"] == reason && labels["method"] == method {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A token may do what its file allows and nothing else: a refused call
// moves nothing, names what is missing and never the token, and is
// counted.
func TestTokens(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		var toks *api.Tokens
		e := start(t, b, api.Authorize(func(ctx context.Context, c api.Call) error { return toks.Authorize(ctx, c) }))
		mine := e.resource(ledger.Resource{Window: time.Hour, DefaultLimit: 5, Lazy: true})
		other := e.resource(ledger.Resource{Window: time.Hour, DefaultLimit: 5, Lazy: true})
		usd := e.resource(ledger.Resource{Kind: ledger.KindMoney, Window: 24 * time.Hour, DefaultLimit: 1000})
		if err := e.c.Provision(ctx(t), usd, ledger.UserLimit{Key: "alice", Limit: 1000}); err != nil {
			t.Fatal(err)
		}
		toks, _ = writeTokens(t, `tokens:
  - name: ops
    token: `+sha(opsToken)+`
    allow: {decide: "*", read: "*", fund: "*", reset: "*"}
  - name: checkout
    token: `+checkoutToken+`
    allow:
      decide: [`+mine.Name+`]
`)
		funds := func() uint64 {
			t.Helper()
			f, err := e.cl.Funds(as(t, opsToken), &tblimitv1.FundsRequest{Resource: usd.Name, User: "alice"})
			if err != nil {
				t.Fatalf("Funds as ops = %v", err)
			}
			return f.GetFunds()
		}
		before := funds()
		fund := &tblimitv1.FundRequest{Resource: usd.Name, User: "alice", Amount: 500}
		for _, c := range []struct {
			token string
			want  codes.Code
		}{{"", codes.Unauthenticated}, {"nosuch", codes.Unauthenticated}, {checkoutToken, codes.PermissionDenied}} {
			_, err := e.cl.Fund(as(t, c.token), fund)
			code(t, "Fund as "+c.token, err, c.want)
			if strings.Contains(err.Error(), checkoutToken) || strings.Contains(err.Error(), "nosuch") {
				t.Errorf("Fund as %q = %v: the message echoes the token", c.token, err)
			}
		}
		if after := funds(); after != before {
			t.Fatalf("Funds after refused Funds = %d, want %d: nothing moved", after, before)
		}
		if _, err := e.cl.Fund(as(t, opsToken), fund); err != nil || funds() != before+500 {
			t.Fatalf("Fund as ops = %v; funds %d, want %d", err, funds(), before+500)
		}

		if d, err := e.cl.Acquire(as(t, checkoutToken), &tblimitv1.AcquireRequest{Resource: mine.Name, User: "u"}); err != nil || !d.GetDecision().GetAllowed() {
			t.Fatalf("Acquire(%s) as checkout = %v, %v; want admitted", mine.Name, d, err)
		}
		_, err := e.cl.Acquire(as(t, checkoutToken), &tblimitv1.AcquireRequest{Resource: other.Name, User: "u"})
		code(t, "Acquire(other) as checkout", err, codes.PermissionDenied)
		if !strings.Contains(err.Error(), other.Name) || !strings.Contains(err.Error(), `"checkout"`) {
			t.Errorf("Acquire(other) as checkout = %v; want the token's name and the resource named", err)
		}
		_, err = e.cl.AcquireAll(as(t, checkoutToken), &tblimitv1.AcquireAllRequest{Parts: []*tblimitv1.Part{
			{Resource: mine.Name, User: "u"}, {Resource: other.Name, User: "u"}}})
		code(t, "AcquireAll(mine, other) as checkout", err, codes.PermissionDenied)
		_, err = e.cl.Reset(as(t, checkoutToken), &tblimitv1.ResetRequest{Resource: mine.Name, User: "u"})
		code(t, "Reset as checkout", err, codes.PermissionDenied)
		_, err = e.cl.History(as(t, checkoutToken), &tblimitv1.HistoryRequest{Resource: mine.Name, User: "u"})
		code(t, "History as checkout", err, codes.PermissionDenied)

		// A reservation on another resource is not checkout's to end.
		rv, err := e.cl.Reserve(as(t, opsToken), &tblimitv1.ReserveRequest{Resource: other.Name, User: "u"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.cl.Cancel(as(t, checkoutToken), &tblimitv1.CancelRequest{ReservationId: rv.GetReservationId()})
		code(t, "Cancel(other's reservation) as checkout", err, codes.PermissionDenied)
		if _, err := e.cl.Cancel(as(t, opsToken), &tblimitv1.CancelRequest{ReservationId: rv.GetReservationId()}); err != nil {
			t.Fatalf("Cancel as ops = %v", err)
		}

		if n := denied(t, toks, "not_allowed", "Fund"); n != 1 {
			t.Errorf("tblimit_api_denied_total{not_allowed, Fund} = %v, want 1", n)
		}
		if n := denied(t, toks, "unknown_token", "Fund"); n != 1 {
			t.Errorf("tblimit_api_denied_total{unknown_token, Fund} = %v, want 1", n)
		}
		if n := denied(t, toks, "no_token", "Fund"); n != 1 {
			t.Errorf("tblimit_api_denied_total{no_token, Fund} = %v, want 1", n)
		}

		for _, c := range []struct {
			path, body string
			header     []string
			want       int
		}{
			{"/v1/fund", `{"resource":"` + usd.Name + `","user":"alice","amount":1}`, nil, http.StatusUnauthorized},
			{"/v1/fund", `{"resource":"` + usd.Name + `","user":"alice","amount":1}`, []string{"Authorization", "Basic b3BzOm9wcw=="}, http.StatusUnauthorized},
			{"/v1/fund", `{"resource":"` + usd.Name + `","user":"alice","amount":1}`, []string{"Authorization", "Bearer " + checkoutToken}, http.StatusForbidden},
			{"/v1/acquire", `{"resource":"` + other.Name + `","user":"u"}`, []string{"Authorization", "Bearer " + checkoutToken}, http.StatusForbidden},
			{"/v1/acquire", `{"resource":"` + mine.Name + `","user":"u"}`, []string{"Authorization", "bearer " + checkoutToken}, http.StatusOK},
			{"/v1/fund", `{"resource":"` + usd.Name + `","user":"alice","amount":1}`, []string{"Authorization", "Bearer " + opsToken}, http.StatusOK},
		} {
			resp := e.post(c.path, c.body, c.header...)
			if resp.code != c.want || strings.Contains(resp.body, checkoutToken) {
				t.Errorf("POST %s %v = %d %s, want %d (and not the token)", c.path, c.header, resp.code, resp.body, c.want)
			}
		}
		if got := funds(); got != before+501 {
			t.Fatalf("Funds after the HTTP calls = %d, want %d", got, before+501)
		}
	})
}

// A token file that is wrong is refused with the file and the line; one
// that changes is read again, and one refused leaves the last in force.
func TestTokenFile(t *testing.T) {
	for _, c := range []struct {
		name, src, want string
	}{
		{"bad YAML", "tokens:\n  - name: a\n    token: [x\n", "yaml: line 2: did not find"},
		{"unknown permission", "tokens:\n  - name: a\n    token: x\n    allow:\n      decide: \"*\"\n      fnd: \"*\"\n", `line 6: token "a": unknown permission "fnd"`},
		{"duplicate token", "tokens:\n  - name: a\n    token: x\n    allow: {read: \"*\"}\n  - name: b\n    token: " + sha("x") + "\n    allow: {read: \"*\"}\n", `line 5: token "b" is the same token as line 2's`},
		{"bad sha256", "tokens:\n  - name: a\n    token: sha256:abc\n    allow: {read: \"*\"}\n", `line 3: token "a": sha256: want 64 hex digits`},
		{"unknown key", "tokens:\n  - name: a\n    token: x\n    alow: {read: \"*\"}\n", `line 4: unknown key "alow"`},
		{"no name", "tokens:\n  - token: x\n    allow: {read: \"*\"}\n", "line 2: a token without a name"},
		{"no allow", "tokens:\n  - name: a\n    token: x\n", `line 2: token "a": no allow`},
		{"no resources", "tokens:\n  - name: a\n    token: x\n    allow: {decide: []}\n", `line 4: token "a": decide: no resources`},
		{"empty", "", "empty"},
		{"a document marker only", "---\n", "empty: want a list of tokens"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens.yaml")
			if err := os.WriteFile(path, []byte(c.src), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := api.LoadTokens(path)
			if !errors.Is(err, api.ErrTokenFile) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("LoadTokens(%q) = %v, want api.ErrTokenFile naming %s and %q", c.src, err, path, c.want)
			}
		})
	}

	toks, path := writeTokens(t, "tokens:\n  - {name: a, token: x, allow: {read: \"*\"}}\n")
	reload := func(force bool, want bool, wantErr bool) {
		t.Helper()
		if got, err := toks.Reload(force); got != want || (err != nil) != wantErr {
			t.Fatalf("Reload(%v) = %v, %v; want %v, error %v", force, got, err, want, wantErr)
		}
	}
	reload(false, false, false) // unchanged
	reload(true, true, false)   // SIGHUP
	write := func(src string) {
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tokens:\n  - {name: a, token: x, allow: {read: \"*\"}}\n  - {name: b, token: y, allow: {read: \"*\"}}\n")
	reload(false, true, false)
	if toks.Len() != 2 {
		t.Fatalf("Len() = %d after the reload, want 2", toks.Len())
	}
	write("tokens:\n  - {name: a, token: x, allow: {raed: \"*\"}}\n")
	reload(false, false, true)
	reload(false, false, false) // refused once, not reported again
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	reload(false, false, true)
	reload(false, false, false) // missing, reported once
	if toks.Len() != 2 {
		t.Fatalf("Len() = %d after a refused file, want 2: the last good one stays", toks.Len())
	}
	write("tokens:\n  - {name: a, token: x, allow: {read: \"*\"}}\n")
	reload(false, true, false)
}
