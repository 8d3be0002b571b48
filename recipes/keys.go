package recipes

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Key functions for HTTP. Each returns "" when the request lacks what it
// names, which the middleware answers with 400 Bad Request: a missing key
// is the caller's error, not an outage.

// ProxyHeader names the header in which trusted proxies report the
// addresses a request came through.
type ProxyHeader uint8

const (
	// XForwardedFor is "X-Forwarded-For: client, proxy1, proxy2".
	XForwardedFor ProxyHeader = iota
	// Forwarded is RFC 7239's "Forwarded: for=client, for=proxy1".
	Forwarded
)

// Proxies says which proxies in front of the server are trusted to report
// the client's address, and in which header. The zero Proxies trusts none:
// the client is the connection's peer, and forwarding headers are ignored,
// since any client can send them.
type Proxies struct {
	// Trusted are the addresses of the trusted proxies (ParsePrefixes).
	Trusted []netip.Prefix
	// Header is the header they append the address of their peer to.
	// Name the one they set: a header they pass through unchanged is the
	// client's to forge.
	Header ProxyHeader
}

// ParsePrefixes parses addresses ("10.0.0.7", "2001:db8::1") and networks
// ("10.0.0.0/8") for Proxies.Trusted.
func ParsePrefixes(s ...string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(s))
	for _, v := range s {
		if a, err := netip.ParseAddr(v); err == nil {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, fmt.Errorf("recipes: trusted proxy %q: not an address or a network", v)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func (p Proxies) trusts(a netip.Addr) bool {
	for _, t := range p.Trusted {
		if t.Contains(a) {
			return true
		}
	}
	return false
}

// ClientIP keys a request by its client's IP address. It starts from the
// connection's peer and, while that address is a trusted proxy, steps back
// one hop in the proxies' header, from the right (the hops the proxies
// appended), so that addresses a client wrote into the header itself are
// never believed. The first address that is not a trusted proxy is the
// client. A hop a trusted proxy reports as "unknown" or malformed ends the
// walk at that proxy (all such requests share its key); an obfuscated
// identifier of RFC 7239 ("_hidden") is the client's key. A peer that is
// not an IP address (a Unix socket) gives "".
func ClientIP(p Proxies) KeyFunc {
	return func(r *http.Request) string {
		peer, ok := parseHost(r.RemoteAddr)
		if !ok {
			return ""
		}
		if !p.trusts(peer) {
			return peer.String()
		}
		hops := forwardedHops(r.Header, p.Header)
		addr := peer
		for i := len(hops) - 1; i >= 0 && p.trusts(addr); i-- {
			h := hops[i]
			if strings.HasPrefix(h, "_") && len(h) > 1 {
				return h
			}
			a, ok := parseHost(h)
			if !ok {
				break
			}
			addr = a
		}
		return addr.String()
	}
}

// parseHost parses an address with or without a port, IPv6 in brackets or
// not, and gives IPv4-mapped addresses as IPv4.
func parseHost(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// forwardedHops lists the addresses of header h, leftmost first, over all
// its lines.
func forwardedHops(hdr http.Header, h ProxyHeader) []string {
	var hops []string
	if h == Forwarded {
		for _, line := range hdr.Values("Forwarded") {
			hops = append(hops, forwardedFor(line)...)
		}
		return hops
	}
	for _, line := range hdr.Values("X-Forwarded-For") {
		for v := range strings.SplitSeq(line, ",") {
			hops = append(hops, strings.TrimSpace(v))
		}
	}
	return hops
}

// forwardedFor returns the for= value of each element of an RFC 7239
// Forwarded field line, in order; an element without one gives "" (a hop
// that names no address). A line that does not parse gives one "" hop: a
// client may have written a quote that runs into what a trusted proxy
// appended after it, so nothing on the line can be believed, and the walk
// ends at the proxy.
func forwardedFor(line string) []string {
	var out []string
	elem, found := "", false
	for {
		name, value, sep, rest, ok := nextPair(line)
		if !ok {
			return []string{""}
		}
		if strings.EqualFold(name, "for") && !found {
			elem, found = value, true
		}
		if sep != ';' { // ',' or the end: the element ends
			out = append(out, elem)
			elem, found = "", false
		}
		if sep == 0 {
			return out
		}
		line = rest
	}
}

// nextPair reads one forwarded-pair (name=value, the value a token or a
// quoted-string, unquoted here) off line, up to the ';' or ',' that ends it
// or the end of the line (sep 0). An empty pair is allowed. ok is false
// when the line does not parse there: a name without a value, a quote
// anywhere but around a whole value, a quoted-string never closed, or
// anything but white space after one.
func nextPair(line string) (name, value string, sep byte, rest string, ok bool) {
	stop := func(c byte) bool { return c == ';' || c == ',' || c == '"' }
	i := 0
	for i < len(line) && line[i] != '=' && !stop(line[i]) {
		i++
	}
	name = strings.TrimSpace(line[:i])
	switch {
	case i < len(line) && line[i] == '=' && name != "":
		if value, i, ok = pairValue(line, i+1); !ok {
			return "", "", 0, "", false
		}
	case name != "" || i < len(line) && line[i] == '"':
		return "", "", 0, "", false
	}
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	switch {
	case i == len(line):
		return name, value, 0, "", true
	case line[i] == ';' || line[i] == ',':
		return name, value, line[i], line[i+1:], true
	}
	return "", "", 0, "", false
}

// pairValue reads the value that starts at line[i] (after white space), a
// token or a quoted-string, and returns it unquoted with the index after it.
func pairValue(line string, i int) (string, int, bool) {
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	if i == len(line) || line[i] != '"' {
		start := i
		for i < len(line) && line[i] != ';' && line[i] != ',' && line[i] != '"' {
			i++
		}
		if i < len(line) && line[i] == '"' {
			return "", 0, false // a quote inside a token
		}
		return strings.TrimSpace(line[start:i]), i, true
	}
	var b strings.Builder
	for i++; i < len(line); i++ {
		switch c := line[i]; c {
		case '"':
			return b.String(), i + 1, true
		case '\\':
			if i++; i == len(line) {
				return "", 0, false
			}
			b.WriteByte(line[i])
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, false // never closed
}

// Header keys a request by the value of header name, such as an API key.
func Header(name string) KeyFunc {
	return func(r *http.Request) string { return strings.TrimSpace(r.Header.Get(name)) }
}

// FromContext keys a request by the value its context holds for key, such
// as the customer an authentication middleware put there: a string, a
// fmt.Stringer, or any other value formatted with %v; nothing is "".
func FromContext(key any) KeyFunc {
	return func(r *http.Request) string {
		switch v := r.Context().Value(key).(type) {
		case nil:
			return ""
		case string:
			return v
		case fmt.Stringer:
			return v.String()
		default:
			return fmt.Sprint(v)
		}
	}
}

// Const keys every request by key: one limit shared by all (a global
// limit).
func Const(key string) KeyFunc { return func(*http.Request) string { return key } }

// Pattern keys a request by the pattern of http.ServeMux that routed it
// ("POST /payments/{id}"): a route, not a path, so that keys stay few. It
// is set only once the mux has routed the request, so use it in middleware
// inside the mux's handlers (mux.Handle(pattern, mw(h))).
func Pattern() KeyFunc { return func(r *http.Request) string { return r.Pattern } }

// Composite keys a request by several keys at once (customer and route),
// joined with '|' ('|' and '\' inside a part are escaped with '\', so that
// different parts never make the same key). It is "" when any part is.
func Composite(parts ...KeyFunc) KeyFunc {
	esc := strings.NewReplacer(`\`, `\\`, `|`, `\|`)
	return func(r *http.Request) string {
		var b strings.Builder
		for i, f := range parts {
			k := f(r)
			if k == "" {
				return ""
			}
			if i > 0 {
				b.WriteByte('|')
			}
			esc.WriteString(&b, k)
		}
		return b.String()
	}
}
