package recipes_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/recipes"
)

func mustPrefixes(t testing.TB, s ...string) []netip.Prefix {
	t.Helper()
	p, err := recipes.ParsePrefixes(s...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClientIP(t *testing.T) {
	lb := mustPrefixes(t, "10.0.0.0/8", "2001:db8:1::/48", "192.0.2.7")
	xff := recipes.Proxies{Trusted: lb}
	fwd := recipes.Proxies{Trusted: lb, Header: recipes.Forwarded}
	for _, c := range []struct {
		name    string
		p       recipes.Proxies
		remote  string
		headers map[string][]string
		want    string
	}{
		{"no proxy trusted: the peer", recipes.Proxies{}, "203.0.113.5:4000", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}}, "203.0.113.5"},
		{"untrusted peer's header is ignored", xff, "203.0.113.5:4000", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}}, "203.0.113.5"},
		{"trusted proxy", xff, "10.1.2.3:4000", map[string][]string{"X-Forwarded-For": {"198.51.100.9"}}, "198.51.100.9"},
		{"client-forged hops are skipped", xff, "10.1.2.3:4000", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.9"}}, "198.51.100.9"},
		{"two trusted proxies", xff, "10.1.2.3:4000", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.9, 10.9.9.9"}}, "198.51.100.9"},
		{"several header lines", xff, "10.1.2.3:4000", map[string][]string{"X-Forwarded-For": {"6.6.6.6", "198.51.100.9, 192.0.2.7"}}, "198.51.100.9"},
		{"trusted proxy without header", xff, "10.1.2.3:4000", nil, "10.1.2.3"},
		{"all hops trusted", xff, "10.1.2.3:4000", map[string][]string{"X-Forwarded-For": {"10.0.0.1"}}, "10.0.0.1"},
		{"garbage hop ends at the proxy", xff, "10.1.2.3:4000", map[string][]string{"X-Forwarded-For": {"not-an-ip"}}, "10.1.2.3"},
		{"IPv4-mapped IPv6 peer", recipes.Proxies{}, "[::ffff:203.0.113.5]:4000", nil, "203.0.113.5"},
		{"IPv6 peer", recipes.Proxies{}, "[2001:db8:2::1]:4000", nil, "2001:db8:2::1"},
		{"XFF ignored when Forwarded is named", fwd, "10.1.2.3:4000", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}}, "10.1.2.3"},
		{"Forwarded", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {"for=198.51.100.9;proto=https"}}, "198.51.100.9"},
		{"Forwarded, quoted IPv6 with port", fwd, "[2001:db8:1::5]:443", map[string][]string{"Forwarded": {`for=6.6.6.6, for="[2001:db8:cafe::17]:4711";by=10.0.0.1`}}, "2001:db8:cafe::17"},
		{"Forwarded, quoted IPv4 with port, By first", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {`By=10.0.0.1;For="198.51.100.9:47011"`}}, "198.51.100.9"},
		{"Forwarded, two proxies over two lines", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {"for=6.6.6.6, for=198.51.100.9", "for=10.2.2.2"}}, "198.51.100.9"},
		{"Forwarded, obfuscated client", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {"for=_gazonk"}}, "_gazonk"},
		{"Forwarded, unknown", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {"for=unknown"}}, "10.1.2.3"},
		{"Forwarded, element without for", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {"proto=http"}}, "10.1.2.3"},
		{"Forwarded, quoted comma", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {`for=198.51.100.9;ext="a,b;c"`}}, "198.51.100.9"},
		{"Forwarded, escaped quote", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {`ext="a\"b", for=198.51.100.9`}}, "198.51.100.9"},
		// A client's unclosed quote runs into what the proxy appended to
		// its line: nothing on the line is believed.
		{"Forwarded, client's open quote", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {`for=9.9.9.9;x=", for=203.0.113.5`}}, "10.1.2.3"},
		{"Forwarded, client's open quote before a quoted hop", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {`for=9.9.9.9;x=", for="[2001:db8::5]:443"`}}, "10.1.2.3"},
		{"Forwarded, open quote in for", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {`for="9.9.9.9, for=203.0.113.5`}}, "10.1.2.3"},
		{"Forwarded, quote inside a token", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {`for=9.9.9.9"x, for=203.0.113.5`}}, "10.1.2.3"},
		{"Forwarded, name without a value", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {`for, for=203.0.113.5`}}, "10.1.2.3"},
		{"Forwarded, a malformed client line beside the proxy's", fwd, "10.1.2.3:4000", map[string][]string{"Forwarded": {`for=9.9.9.9;x="`, "for=203.0.113.5"}}, "203.0.113.5"},
		{"unparsable peer", recipes.Proxies{}, "pipe", nil, ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		for k, vs := range c.headers {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
		if got := recipes.ClientIP(c.p)(r); got != c.want {
			t.Errorf("%s: ClientIP = %q, want %q", c.name, got, c.want)
		}
	}
	if _, err := recipes.ParsePrefixes("10.0.0.0/33"); err == nil {
		t.Error("ParsePrefixes(10.0.0.0/33): no error")
	}
	if p := mustPrefixes(t, "::ffff:10.0.0.0/104"); p[0].String() != "10.0.0.0/8" {
		t.Errorf("ParsePrefixes of a mapped network = %v, want 10.0.0.0/8", p)
	}
}

// ClientIP never panics, and gives "" or a key a trusted proxy cannot be.
func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.1:80", "for=198.51.100.9", "1.2.3.4, 10.0.0.2")
	f.Add("[2001:db8:1::5]:443", `for="[2001:db8:cafe::17]:4711";by=x, for=_hidden`, "")
	f.Add("10.0.0.1:80", `for="\"quoted\\";,;,`, ",,,")
	trusted := mustPrefixes(f, "10.0.0.0/8", "2001:db8:1::/48")
	f.Fuzz(func(t *testing.T, remote, forwarded, xff string) {
		for _, h := range []recipes.ProxyHeader{recipes.XForwardedFor, recipes.Forwarded} {
			r := &http.Request{RemoteAddr: remote, Header: http.Header{"Forwarded": {forwarded}, "X-Forwarded-For": {xff}}}
			got := recipes.ClientIP(recipes.Proxies{Trusted: trusted, Header: h})(r)
			if got == "" || strings.HasPrefix(got, "_") {
				continue
			}
			a, err := netip.ParseAddr(got)
			if err != nil {
				t.Fatalf("ClientIP = %q: not an address", got)
			}
			if peer, err := netip.ParseAddrPort(remote); err == nil && !trusted[0].Contains(peer.Addr().Unmap()) && !trusted[1].Contains(peer.Addr()) && a != peer.Addr().Unmap().WithZone("") {
				t.Fatalf("ClientIP = %q for an untrusted peer %q", got, remote)
			}
		}
	})
}

type ctxKey struct{}

type customer int

func (c customer) String() string { return "cust-" + string(rune('0'+int(c))) }

func TestKeyFuncs(t *testing.T) {
	r := httptest.NewRequest("POST", "/pay", nil)
	r.Header.Set("X-Api-Key", "  secret ")
	if got := recipes.Header("X-Api-Key")(r); got != "secret" {
		t.Errorf("Header = %q", got)
	}
	if got := recipes.Header("X-Missing")(r); got != "" {
		t.Errorf("Header of a missing header = %q", got)
	}
	for v, want := range map[any]string{nil: "", "acme": "acme", customer(7): "cust-7", 42: "42"} {
		r := r.WithContext(context.WithValue(context.Background(), ctxKey{}, v))
		if got := recipes.FromContext(ctxKey{})(r); got != want {
			t.Errorf("FromContext(%v) = %q, want %q", v, got, want)
		}
	}
	key := func(s string) recipes.KeyFunc { return func(*http.Request) string { return s } }
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"acme", "POST /pay"}, "acme|POST /pay"},
		{[]string{"a|b", "c"}, `a\|b|c`},
		{[]string{"a", "b|c"}, `a|b\|c`},
		{[]string{`a\`, "b"}, `a\\|b`},
		{[]string{"acme", ""}, ""},
	} {
		var fs []recipes.KeyFunc
		for _, p := range c.parts {
			fs = append(fs, key(p))
		}
		if got := recipes.Composite(fs...)(r); got != c.want {
			t.Errorf("Composite(%q) = %q, want %q", c.parts, got, c.want)
		}
	}
	if got := recipes.Const("all")(r); got != "all" {
		t.Errorf("Const = %q", got)
	}
	var pattern string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /pay/{id}", func(w http.ResponseWriter, r *http.Request) { pattern = recipes.Pattern()(r) })
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/pay/123", nil))
	if pattern != "POST /pay/{id}" {
		t.Errorf("Pattern = %q", pattern)
	}
}
