package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/text/unicode/norm"
	"google.golang.org/grpc/codes"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/service"
)

// Entry is one key and value of a request's descriptor.
type Entry struct {
	Key, Value string
}

// match is what one request descriptor met in a configuration.
type match struct {
	rule   *Rule
	user   string // the user key: the descriptor's values, encoded (UserKey)
	metric string // the name its metrics are counted under
}

// find returns the entry of lv that key and value meet, the most specific
// first: the key and its value, then a wildcard value (in file order),
// then the key alone; and whether it matched the value (exactly or by a
// wildcard).
func (lv *level) find(key, value string) (e *entry, byValue bool) {
	if e := lv.exact[key+"_"+value]; e != nil && e.key == key && e.value != "" {
		return e, true
	}
	for _, w := range lv.wildcard {
		if w.key == key && glob(w.parts, value) {
			return w, true
		}
	}
	if e := lv.exact[key]; e != nil && e.value == "" {
		return e, false
	}
	return nil, false
}

// glob reports whether s is parts joined by runs of any characters.
func glob(parts []string, s string) bool {
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := len(parts) - 1
	for _, p := range parts[1:last] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[last])
}

// hasDomain reports whether c has rules of domain.
func (c *Config) hasDomain(domain string) bool { return c.domains[domain] != nil }

// lookup finds the rule that a descriptor of domain meets, as
// envoyproxy/ratelimit does: level by level, each entry of the descriptor
// against the level of the same depth, the most specific match first; the
// rule of the entry matched by the descriptor's last entry applies. A
// descriptor with more or fewer entries than the rule's levels meets no
// rule (nil).
func (c *Config) lookup(domain string, entries []Entry) (match, bool) {
	lv := c.domains[domain]
	if lv == nil || len(entries) == 0 {
		return match{}, false
	}
	var m match
	var shown, detailed strings.Builder
	shown.WriteString(domain)
	detailed.WriteString(domain)
	values := make([]string, len(entries))
	shared := make([]bool, len(entries))
	for i, en := range entries {
		e, byValue := lv.find(en.Key, en.Value)
		values[i] = en.Value
		if e == nil {
			break
		}
		shownValue := ""
		switch {
		case e.share:
			// A shared wildcard: one user, and one metric, for every value
			// it matches.
			values[i], shared[i] = e.value, true
			shownValue = e.value
		case byValue && e.parts == nil, e.valueToMetric:
			shownValue = en.Value
		case byValue:
			shownValue = e.value
		}
		shown.WriteString("." + en.Key)
		if shownValue != "" {
			shown.WriteString("_" + shownValue)
		}
		detailed.WriteString("." + en.Key + "_" + values[i])
		if e.rule != nil && i == len(entries)-1 {
			m.rule = e.rule
			m.metric = shown.String()
			if e.rule.DetailedMetric {
				m.metric = detailed.String()
			}
		}
		if e.children == nil {
			break
		}
		lv = e.children
	}
	if m.rule == nil {
		return match{}, false
	}
	m.user = userKey(values, shared)
	return m, true
}

// UserKey is the user key, on a rule's resource, of a descriptor with
// values: what `tblimit history` and `tblimit audit` take to show that
// descriptor's admissions. The values are joined by '|'; in each, '%',
// '|', control characters, invalid UTF-8 and white space at either end
// are written %XX (the UTF-8 bytes in hex), as are a character beyond
// ASCII right after such an escape and every byte beyond ASCII of a value
// not in Unicode normal form C; an empty value is "%_", and a value shared
// by a wildcard (share_threshold) is "%*" and its pattern. A key longer
// than ledger.MaxKeyLen bytes, or one that would still not be in its
// normal form, is "%#" and the hex SHA-256 of it. So every descriptor, whatever its bytes, is a valid key
// (ledger.NormalizeKey leaves it alone), and distinct descriptors are
// distinct users.
func UserKey(values []string) string { return userKey(values, nil) }

// userKey is UserKey where shared[i] says values[i] is the pattern of a
// shared wildcard.
func userKey(values []string, shared []bool) string {
	var b strings.Builder
	for i, v := range values {
		if i > 0 {
			b.WriteByte('|')
		}
		if i < len(shared) && shared[i] {
			b.WriteString("%*")
		}
		escapeValue(&b, v)
	}
	key := b.String()
	// The escapes keep a key in its normal form (see escapeValue); the
	// check makes sure of it, whatever Unicode composes.
	if n, err := ledger.NormalizeKey(key); len(key) > ledger.MaxKeyLen || err != nil || n != key {
		sum := sha256.Sum256([]byte(key))
		return "%#" + hex.EncodeToString(sum[:])
	}
	return key
}

// escapeValue writes v to b, escaped as UserKey says.
func escapeValue(b *strings.Builder, v string) {
	if v == "" {
		b.WriteString("%_")
		return
	}
	nfc := norm.NFC.IsNormalString(v)
	escaped := false // the rune before was escaped
	for i := 0; i < len(v); {
		r, size := utf8.DecodeRuneInString(v[i:])
		end := i == 0 || i+size == len(v)
		// A rune beyond ASCII after an escape is escaped too: a combining
		// mark would compose with the escape's last hex digit.
		escaped = r == '%' || r == '|' || r < utf8.RuneSelf && (r < 0x20 || r == 0x7f) ||
			r == utf8.RuneError && size == 1 || r >= utf8.RuneSelf && (!nfc || escaped) ||
			unicode.IsControl(r) || end && unicode.IsSpace(r)
		if escaped {
			for _, c := range []byte(v[i : i+size]) {
				b.WriteByte('%')
				b.WriteByte("0123456789ABCDEF"[c>>4])
				b.WriteByte("0123456789ABCDEF"[c&15])
			}
		} else {
			b.WriteString(v[i : i+size])
		}
		i += size
	}
}

// match finds the rule of each descriptor of req, drops those other rules
// of the request replace, and sorts the descriptors: to decide in the
// chain (part 0), refused without the cluster, checked only, or not limited.
func (s *Service) match(ctx context.Context, req *rls.RateLimitRequest) ([]item, error) {
	st := s.state.Load()
	items := make([]item, len(req.GetDescriptors()))
	replaced := map[string]bool{}
	for i, d := range req.GetDescriptors() {
		it := &items[i]
		it.part = partNone
		entries := make([]Entry, 0, len(d.GetEntries()))
		var named []Entry // entries that name the request (Rule.ReserveKey, SettleKey)
		for _, e := range d.GetEntries() {
			en := Entry{Key: e.GetKey(), Value: e.GetValue()}
			if ids := st.cfg.idKeys[req.GetDomain()]; ids[en.Key] {
				named = append(named, en)
				continue
			}
			entries = append(entries, en)
		}
		values := make([]string, len(entries))
		for j, en := range entries {
			values[j] = en.Value
		}
		it.hits = max(uint64(req.GetHitsAddend()), 1)
		if h := d.GetHitsAddend(); h != nil {
			it.hits = h.GetValue() // 0: check only, as Envoy asks at a request's start
		}
		if lim := d.GetLimit(); lim != nil && len(entries) > 0 {
			if !st.cfg.hasDomain(req.GetDomain()) {
				continue // as envoyproxy/ratelimit: an unknown domain limits nothing
			}
			rl, err := s.override(ctx, req.GetDomain(), entries, lim)
			if err != nil {
				return nil, err
			}
			it.rule, it.limit, it.user, it.metric = rl, lim.GetRequestsPerUnit(), UserKey(values), rl.Key
			continue
		}
		m, ok := st.cfg.lookup(req.GetDomain(), entries)
		if !ok {
			continue
		}
		it.user, it.metric = m.user, m.metric
		for _, name := range m.rule.Replaces {
			replaced[name] = true
		}
		if m.rule.Unlimited {
			it.rule = &rule{Rule: m.rule}
			continue
		}
		it.rule, it.limit = st.rules[m.rule], m.rule.RequestsPerUnit
		if err := it.costOf(named); err != nil {
			return nil, err
		}
	}
	for i := range items {
		it := &items[i]
		switch {
		case it.rule == nil || it.rule.Unlimited:
		case it.rule.Name != "" && replaced[it.rule.Name]:
			it.rule = nil
		case it.cost == costSettle, it.cost == costCharge && it.hits > 0:
			it.part = partAfter
		case it.cost == costCharge:
			it.part = partReserve // the check before a call: holds what calls cost lately (see provisional)
		case it.hits == 0:
			it.part = partCheck
		case it.limit == 0 || it.hits > uint64(it.limit):
			it.part = partRefused
		case it.cost == costReserve:
			it.part = partReserve
		default:
			it.part = 0
		}
	}
	return items, nil
}

// costOf sets how its hits count under its rule, from the entries of its
// descriptor that name a request: a rule that pairs checks with charges
// needs exactly one, its check's or its charge's.
func (it *item) costOf(named []Entry) error {
	r := it.rule.Rule
	if r.ChargeAfter {
		it.cost = costCharge
	}
	if r.ReserveKey == "" {
		return nil
	}
	for _, en := range named {
		switch en.Key {
		case r.ReserveKey:
			it.cost = costReserve
		case r.SettleKey:
			it.cost = costSettle
		default:
			continue
		}
		if it.reqID != "" {
			return service.Errorf(codes.InvalidArgument, service.ReasonInvalidArgument, "a descriptor of rule %s names its request twice (entries %q and %q): want one", r.Key, r.ReserveKey, r.SettleKey)
		}
		if it.reqID = en.Value; it.reqID == "" {
			return service.Errorf(codes.InvalidArgument, service.ReasonInvalidArgument, "a descriptor of rule %s has an empty request ID in entry %q", r.Key, en.Key)
		}
	}
	if it.reqID == "" {
		return service.Errorf(codes.InvalidArgument, service.ReasonInvalidArgument, "a descriptor of rule %s names no request: rule %s:%d pairs a call's check (entry %q) with its charge (entry %q) by the request's ID",
			r.Key, r.File, r.Line, r.ReserveKey, r.SettleKey)
	}
	return nil
}

// override is the rule of a descriptor that carries its own limit (Envoy's
// per-descriptor limit override): a rule of its domain and keys, created
// on first use.
func (s *Service) override(ctx context.Context, domain string, entries []Entry, lim *rlcommon.RateLimitDescriptor_RateLimitOverride) (*rule, error) {
	raw := lim.GetUnit()
	if raw < 1 || raw > 7 {
		return nil, service.Errorf(codes.InvalidArgument, service.ReasonInvalidArgument, "a descriptor's limit override has unit %v: want SECOND to YEAR", raw)
	}
	u := TimeUnit(raw)
	spec := domain + "\x00override"
	key := domain
	for _, e := range entries {
		spec += "\x00" + e.Key
		key += "." + e.Key
	}
	spec += "\x00" + u.String()
	s.overridesMu.Lock()
	rl := s.overrides[spec]
	s.overridesMu.Unlock()
	if rl != nil {
		return rl, nil
	}
	rl, err := s.newRule(ctx, &Rule{Domain: domain, Key: key, Unit: u, spec: spec, File: "(limit override)"})
	if err != nil {
		return nil, err
	}
	s.overridesMu.Lock()
	defer s.overridesMu.Unlock()
	if prev := s.overrides[spec]; prev != nil {
		return prev, nil
	}
	if len(s.overrides) >= maxOverrides {
		return nil, service.Errorf(codes.InvalidArgument, service.ReasonInvalidArgument, "more than %d distinct limit overrides (domain, keys, unit): refused", maxOverrides)
	}
	s.overrides[spec] = rl
	return rl, nil
}

// maxOverrides bounds the rules of Envoy's per-descriptor limits a Service
// keeps: each is a resource in the cluster, and callers make them.
const maxOverrides = 10_000
