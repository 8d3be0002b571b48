package recipes

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// The RateLimit header fields of draft-ietf-httpapi-ratelimit-headers-10,
// written as RFC 9651 structured-field lists: one item per policy, a
// String naming it, with parameters. RateLimit-Policy says the policy
// (q: the key's quota, qu: its unit when not requests, w: the window in
// seconds); RateLimit says its state (r: remaining, t: seconds until more
// quota is available).

// policyItem is one policy as the RateLimit headers see it.
type policyItem struct {
	name   string
	unit   Unit
	quota  uint64
	window time.Duration // 0: no window (concurrency)
	// state, when known: remaining units and seconds until more return.
	known     bool
	remaining uint64
	reset     time.Duration
	noReset   bool // t is left out (concurrency, when admitted)
}

// itemOf is the header item of policy result p: every RateLimit item the
// package and the services write is made here. A policy not decided
// (Skipped, Undecided, or the cluster unavailable) has no known state.
func itemOf(p PolicyResult) policyItem {
	it := policyItem{name: p.Policy, unit: p.Unit, quota: p.Decision.Limit, window: p.Window}
	if p.Skipped() || p.Decision.Reason == ledger.Unavailable || p.Decision.Reason == ledger.Undecided {
		return it
	}
	// t is when more quota returns, as ledger.Decision.ResetIn says: an
	// upper bound, which the draft allows.
	it.known, it.remaining, it.reset = true, p.Decision.Remaining, p.Decision.ResetIn()
	// A slot returns when a request ends (or its lease does): t is said
	// only when one was refused.
	it.noReset = p.Unit == ConcurrentRequests && p.Decision.Allowed
	return it
}

// RateLimitFields returns the values of the RateLimit-Policy and RateLimit
// fields (draft-ietf-httpapi-ratelimit-headers-10) that report r: an item
// per enforcing policy, named by its Policy, as StackMiddleware writes
// them; "" when there is nothing to report (every policy in shadow mode,
// or the cluster unavailable). Use it to answer from a handler that
// decides for itself.
func (r Result) RateLimitFields() (policy, state string) {
	return rateLimitFields(r.items())
}

// items are the header items of r's enforcing policies.
func (r Result) items() []policyItem {
	var items []policyItem
	for _, p := range r.Policies() {
		if p.Shadow || r.Reason == ledger.Unavailable {
			continue
		}
		it := itemOf(p)
		if !r.Allowed && r.RetryAfter >= 0 {
			// The draft: Retry-After should not be earlier than any t.
			it.reset = min(it.reset, r.RetryAfter)
		}
		items = append(items, it)
	}
	return items
}

// rateLimitFields joins the items into the two fields' values.
func rateLimitFields(items []policyItem) (policy, state string) {
	var ps, ss []string
	for _, it := range items {
		ps = append(ps, it.policy())
		if it.known {
			ss = append(ss, it.state())
		}
	}
	return strings.Join(ps, ", "), strings.Join(ss, ", ")
}

// PolicyFields returns the values of the RateLimit-Policy and RateLimit
// fields that report policies as they are: an item per policy, its state
// only when it was decided (see RateLimitFields for a Result's, which
// leaves out the policies in shadow mode and an unavailable cluster's).
// tblimit.v1's HTTP answers carry those of their decisions (see
// PolicyOf).
func PolicyFields(policies ...PolicyResult) (policy, state string) {
	items := make([]policyItem, len(policies))
	for i, p := range policies {
		items[i] = itemOf(p)
	}
	return rateLimitFields(items)
}

// writeRateLimit adds the RateLimit-Policy and RateLimit lines that report
// res to h: every middleware of the package writes its fields here. It adds
// (never sets) a line of each, so that several middlewares each add
// theirs: a list split over several lines is one list (RFC 9651 §3.1).
func writeRateLimit(h http.Header, res Result) {
	policy, state := res.RateLimitFields()
	if policy != "" {
		h.Add("RateLimit-Policy", policy)
	}
	if state != "" {
		h.Add("RateLimit", state)
	}
}

func (it policyItem) policy() string {
	s := sfString(it.name) + ";q=" + sfInteger(it.quota)
	if it.unit != Requests {
		s += ";qu=" + sfString(it.unit.String())
	}
	if it.window > 0 {
		s += ";w=" + sfInteger(ceilSeconds(it.window))
	}
	return s
}

func (it policyItem) state() string {
	s := sfString(it.name) + ";r=" + sfInteger(it.remaining)
	if !it.noReset {
		s += ";t=" + sfInteger(ceilSeconds(it.reset))
	}
	return s
}

// sfMaxInteger is the largest RFC 9651 Integer (15 digits).
const sfMaxInteger = 999_999_999_999_999

// sfInteger writes n as an RFC 9651 Integer, capped at the largest one:
// limits and amounts go up to 2^63-1, which has 19 digits.
func sfInteger(n uint64) string { return strconv.FormatUint(min(n, sfMaxInteger), 10) }

// sfString writes s as an RFC 9651 String: printable ASCII in quotes, '"'
// and '\' escaped. Policy names are a-z 0-9 - _ . and units are fixed
// words, so nothing else occurs; anything else would be dropped.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c <= 0x7e:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ceilSeconds is d in whole seconds, rounded up, 0 for d ≤ 0.
func ceilSeconds(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64(math.Ceil(d.Seconds()))
}
