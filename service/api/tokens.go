package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tblimit/tblimit/internal/yamlpos"
	"github.com/tblimit/tblimit/service"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// Tokens authorizes calls by bearer token (authorization: Bearer <token>),
// from a file that gives each token a name and what its callers may do
// (docs/api.md#authorization has the format). Use its Authorize method as
// the Service's (api.Authorize(tokens.Authorize)); Reload reads the file
// again. It is a prometheus.Collector of the calls it refused,
// tblimit_api_denied_total{reason, method}. It is safe for concurrent use.
type Tokens struct {
	path   string
	table  atomic.Pointer[tokenTable]
	denied *prometheus.CounterVec

	mu         sync.Mutex        // serializes Reload; guards the fields below
	last       [sha256.Size]byte // the contents last read, in force or refused
	unreadable bool              // the last read failed
}

// Reasons a call is refused, the reason label of tblimit_api_denied_total.
const (
	deniedNoToken      = "no_token"      // no authorization: Bearer (UNAUTHENTICATED)
	deniedUnknownToken = "unknown_token" // a token the file does not have (UNAUTHENTICATED)
	deniedNotAllowed   = "not_allowed"   // the token lacks the permission (PERMISSION_DENIED)
)

// tokenTable is one reading of the file: grants by the SHA-256 of their token.
type tokenTable struct {
	byHash map[[sha256.Size]byte]*grant
}

// grant is what one token may do: per permission, on which resources.
type grant struct {
	name  string
	allow map[Permission]resourceSet
}

// resourceSet is a list of resource names, or every resource ("*").
type resourceSet struct {
	all   bool
	names map[string]bool
}

func (rs resourceSet) has(name string) bool { return rs.all || rs.names[name] }

// LoadTokens reads the token file at path.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path, denied: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tblimit_api_denied_total",
		Help: "tblimit.v1 calls refused by --api-tokens, by reason (no_token, unknown_token, not_allowed) and method.",
	}, []string{"reason", "method"})}
	if _, err := t.Reload(true); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the file again and puts it in force, when its contents
// differ from those last read or when force is set; it reports whether it
// did. A file that does not parse is an error and leaves the tokens in
// force; without force, the same contents refused (or a file that cannot
// be read) are reported once.
func (t *Tokens) Reload(force bool) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	src, err := os.ReadFile(t.path)
	if err != nil {
		if t.unreadable && !force {
			return false, nil
		}
		t.unreadable, t.last = true, [sha256.Size]byte{}
		return false, fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	t.unreadable = false
	sum := sha256.Sum256(src)
	if sum == t.last && !force {
		return false, nil
	}
	t.last = sum
	table, err := parseTokens(t.path, src)
	if err != nil {
		return false, err
	}
	t.table.Store(table)
	return true, nil
}

// Path returns the token file's path.
func (t *Tokens) Path() string { return t.path }

// Resources returns the resource names the tokens in force grant
// permissions on ("*" left out), sorted, each once.
func (t *Tokens) Resources() []string {
	seen := map[string]bool{}
	for _, g := range t.table.Load().byHash {
		for _, rs := range g.allow {
			for name := range rs.names {
				if name != "*" {
					seen[name] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Len returns how many tokens are in force.
func (t *Tokens) Len() int { return len(t.table.Load().byHash) }

// Authorize refuses a call without a bearer token, or with one the file
// does not have (codes.Unauthenticated, HTTP 401), and one whose token
// lacks the permission on one of c.Resources (codes.PermissionDenied,
// HTTP 403). A call that names no resource (Commit and Cancel, before
// their reservation is found) needs the permission on some resource. The
// messages name the token by its name, never the token itself.
func (t *Tokens) Authorize(ctx context.Context, c Call) error {
	method := path.Base(c.Method)
	secret, ok := bearer(ctx)
	if !ok {
		t.denied.WithLabelValues(deniedNoToken, method).Inc()
		return service.Errorf(codes.Unauthenticated, service.ReasonUnauthenticated, "api: no bearer token: send the header authorization: Bearer <token>")
	}
	g := t.table.Load().byHash[sha256.Sum256([]byte(secret))]
	if g == nil {
		t.denied.WithLabelValues(deniedUnknownToken, method).Inc()
		return service.Errorf(codes.Unauthenticated, service.ReasonUnauthenticated, "api: unknown bearer token")
	}
	rs, ok := g.allow[c.Permission]
	if !ok {
		t.denied.WithLabelValues(deniedNotAllowed, method).Inc()
		return service.Errorf(codes.PermissionDenied, service.ReasonPermissionDenied, "api: token %q lacks the %s permission (%s)", g.name, c.Permission, method)
	}
	for _, r := range c.Resources {
		if !rs.has(r) {
			t.denied.WithLabelValues(deniedNotAllowed, method).Inc()
			return service.Errorf(codes.PermissionDenied, service.ReasonPermissionDenied, "api: token %q lacks the %s permission on resource %q (%s)", g.name, c.Permission, r, method)
		}
	}
	return nil
}

// bearer is the token of the call's authorization metadata (the HTTP
// Authorization header): "Bearer <token>", the scheme in any case.
func bearer(ctx context.Context) (string, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
		if ok && strings.EqualFold(scheme, "bearer") && strings.TrimSpace(tok) != "" {
			return strings.TrimSpace(tok), true
		}
	}
	return "", false
}

// Describe is prometheus.Collector's.
func (t *Tokens) Describe(ch chan<- *prometheus.Desc) { t.denied.Describe(ch) }

// Collect is prometheus.Collector's.
func (t *Tokens) Collect(ch chan<- prometheus.Metric) { t.denied.Collect(ch) }

// parseTokens parses a token file:
//
//	tokens:
//	  - name: checkout
//	    token: sha256:<64 hex digits>   # or the token itself
//	    allow:
//	      decide: [api, usd-day]        # or "*": every resource
//	      read: [usd-day]
//
// We considered a line-per-token format; YAML was chosen because serve's
// configuration is YAML already and a token's grants are a small tree.
func parseTokens(file string, src []byte) (*tokenTable, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrTokenFile, file, err)
	}
	bad := func(n *yaml.Node, format string, args ...any) error {
		return fmt.Errorf("%w %s, line %d: %s", ErrTokenFile, file, n.Line, fmt.Sprintf(format, args...))
	}
	if yamlpos.Empty(&doc) {
		return nil, fmt.Errorf("%w %s: empty: want a list of tokens under the key tokens", ErrTokenFile, file)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, bad(root, "want a mapping with tokens:")
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "tokens" {
			return nil, bad(k, "unknown key %q: want tokens", k.Value)
		}
		list = v
	}
	if list == nil {
		return nil, bad(root, "no tokens:")
	}
	if list.Kind != yaml.SequenceNode && !(list.Kind == yaml.ScalarNode && list.Tag == "!!null") {
		return nil, bad(list, "tokens: want a list")
	}
	table := &tokenTable{byHash: map[[sha256.Size]byte]*grant{}}
	lines := map[[sha256.Size]byte]int{}
	for _, n := range list.Content {
		hash, g, err := parseGrant(n, bad)
		if err != nil {
			return nil, err
		}
		if first, dup := lines[hash]; dup {
			return nil, bad(n, "token %q is the same token as line %d's", g.name, first)
		}
		lines[hash], table.byHash[hash] = n.Line, g
	}
	return table, nil
}

// parseGrant parses one entry of the list: its token's SHA-256 and grant.
func parseGrant(n *yaml.Node, bad func(*yaml.Node, string, ...any) error) ([sha256.Size]byte, *grant, error) {
	var hash [sha256.Size]byte
	if n.Kind != yaml.MappingNode {
		return hash, nil, bad(n, "a token: want a mapping with name, token and allow")
	}
	g := &grant{allow: map[Permission]resourceSet{}}
	var tok, allow *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "name":
			g.name = v.Value
		case "token":
			tok = v
		case "allow":
			allow = v
		default:
			return hash, nil, bad(k, "unknown key %q: want name, token or allow", k.Value)
		}
	}
	switch {
	case g.name == "":
		return hash, nil, bad(n, "a token without a name")
	case tok == nil || tok.Kind != yaml.ScalarNode || tok.Value == "":
		return hash, nil, bad(n, "token %q: no token: want sha256:<hex> or the token", g.name)
	case allow == nil || allow.Kind != yaml.MappingNode || len(allow.Content) == 0:
		return hash, nil, bad(n, "token %q: no allow: want decide, read, fund, reset or admin, each with resources or \"*\"", g.name)
	}
	hash, err := tokenHash(tok.Value)
	if err != nil {
		return hash, nil, bad(tok, "token %q: %v", g.name, err)
	}
	for i := 0; i+1 < len(allow.Content); i += 2 {
		k, v := allow.Content[i], allow.Content[i+1]
		p, ok := permissionNamed(k.Value)
		if !ok {
			return hash, nil, bad(k, "token %q: unknown permission %q: want decide, read, fund, reset or admin", g.name, k.Value)
		}
		rs, err := parseResources(v)
		if err != nil {
			return hash, nil, bad(v, "token %q: %s: %v", g.name, p, err)
		}
		g.allow[p] = rs
	}
	return hash, g, nil
}

// tokenHash is the SHA-256 of a token given as sha256:<hex>, or as itself.
func tokenHash(s string) ([sha256.Size]byte, error) {
	var hash [sha256.Size]byte
	hexSum, ok := strings.CutPrefix(s, "sha256:")
	if !ok {
		if strings.ContainsAny(s, " \t\r\n") {
			return hash, fmt.Errorf("a token with white space")
		}
		return sha256.Sum256([]byte(s)), nil
	}
	b, err := hex.DecodeString(hexSum)
	if err != nil || len(b) != sha256.Size {
		return hash, fmt.Errorf("sha256: want %d hex digits", 2*sha256.Size)
	}
	copy(hash[:], b)
	return hash, nil
}

// parseResources parses a permission's resources: a list of names, or
// "*" (alone or in the list) for every resource.
func parseResources(n *yaml.Node) (resourceSet, error) {
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	rs := resourceSet{names: map[string]bool{}}
	for _, it := range items {
		if it.Kind != yaml.ScalarNode || it.Value == "" {
			return rs, fmt.Errorf("want resource names or \"*\"")
		}
		if it.Value == "*" {
			rs.all = true
		}
		rs.names[it.Value] = true
	}
	if len(rs.names) == 0 {
		return rs, fmt.Errorf("no resources: want resource names or \"*\"")
	}
	return rs, nil
}

// permissionNamed is the Permission named s (Permission.String).
func permissionNamed(s string) (Permission, bool) {
	for _, p := range []Permission{PermDecide, PermFund, PermReset, PermRead, PermAdmin} {
		if p.String() == s {
			return p, true
		}
	}
	return 0, false
}
