package recipes

import (
	"fmt"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// Unit says what a policy counts, in the terms of an HTTP request: its
// String is the quota unit the RateLimit-Policy header names ("qu"). It is
// finer than the ledger.Kind of the policy's resource, which says only
// what a unit is: a Requests, ConcurrentRequests or Tokens policy is kept
// as a ledger.KindRequests resource, a ContentBytes one as
// ledger.KindBytes, a CurrencyUnits one as ledger.KindMoney.
type Unit uint8

const (
	// Requests counts requests: a request takes Cost.Requests units (1
	// unless said otherwise). It is the zero Unit.
	Requests Unit = iota
	// ContentBytes counts the bytes of a request's content: a request takes
	// Cost.Bytes units.
	ContentBytes
	// ConcurrentRequests counts requests in flight. It is the unit of
	// Concurrency, not of a Limiter's policies.
	ConcurrentRequests
	// Tokens counts the tokens of LLM calls. It is the unit of LLM's token
	// limits, not of a Limiter's policies.
	Tokens
	// CurrencyUnits counts money, in a currency's smallest unit. It is the
	// unit of MoneyPerWindow, not of a Limiter's policies.
	CurrencyUnits
)

// String returns "requests", "content-bytes", "concurrent-requests",
// "tokens" or "currency-units".
func (u Unit) String() string {
	switch u {
	case Requests:
		return "requests"
	case ContentBytes:
		return "content-bytes"
	case ConcurrentRequests:
		return "concurrent-requests"
	case Tokens:
		return "tokens"
	case CurrencyUnits:
		return "currency-units"
	}
	return fmt.Sprintf("Unit(%d)", uint8(u))
}

// kind is the ledger.Kind of a resource that counts u: bytes for
// ContentBytes, money for CurrencyUnits, requests for the others.
func (u Unit) kind() ledger.Kind {
	switch u {
	case ContentBytes:
		return ledger.KindBytes
	case CurrencyUnits:
		return ledger.KindMoney
	}
	return ledger.KindRequests
}

// unitOf is the Unit of a single-limit recipe's resource of kind k (see
// Unit.kind): Requests, ContentBytes or CurrencyUnits.
func unitOf(k ledger.Kind) Unit {
	switch k {
	case ledger.KindBytes:
		return ContentBytes
	case ledger.KindMoney:
		return CurrencyUnits
	}
	return Requests
}

// Policy is one limit of a Limiter: at most Limit.N units in any interval
// of Limit.Window for each key, kept on a TigerBeetle ledger of its own
// (one resource). A Policy is a plain value, validated by NewLimiter.
type Policy struct {
	// Name names the policy in errors, metrics and RateLimit headers, and
	// its resource in the cluster: 1 to 12 characters of a-z 0-9 - _ .
	Name string
	// Ledger is the TigerBeetle ledger number, one per policy.
	Ledger uint32
	// Limit is every key's limit unless its plan says otherwise (see
	// WithPlans).
	Limit Limit
	// Unit is what the policy counts: Requests (the zero value) or
	// ContentBytes.
	Unit Unit
	// Lazy gives a key seen for the first time its limit within its first
	// decision, instead of failing with ledger.ErrUnknownUser.
	Lazy bool
}

// countsWhatItsLimitSays makes a policy whose Limit was built from Bytes
// count content bytes (Unit ContentBytes), and refuses one built from an
// Amount (money is MoneyPerWindow's) or from Bytes with another Unit set.
func (p *Policy) countsWhatItsLimitSays() error {
	switch p.Limit.of {
	case bytesMeasure:
		if p.Unit != Requests && p.Unit != ContentBytes {
			return fmt.Errorf("%w: policy %q: a Bytes limit counts content-bytes, not %v", ledger.ErrInvalidResource, p.Name, p.Unit)
		}
		p.Unit = ContentBytes
	case moneyMeasure:
		return fmt.Errorf("%w: policy %q: an Amount limit is money: use NewMoneyPerWindow", ledger.ErrInvalidResource, p.Name)
	}
	return nil
}

// resource is p's definition in the ledger.
func (p Policy) resource() (ledger.Resource, error) {
	if _, err := ledger.WindowSeconds(p.Limit.Window); err != nil {
		return ledger.Resource{}, fmt.Errorf("recipes: policy %q: limit %v: %w", p.Name, p.Limit, err)
	}
	if p.Unit != Requests && p.Unit != ContentBytes {
		return ledger.Resource{}, fmt.Errorf("%w: policy %q: unit %v (a Limiter counts requests or content-bytes; use Concurrency for requests in flight)", ledger.ErrInvalidResource, p.Name, p.Unit)
	}
	r := ledger.Resource{Name: p.Name, Ledger: p.Ledger, Kind: p.Unit.kind(), Window: p.Limit.Window, DefaultLimit: p.Limit.N, Lazy: p.Lazy}
	if err := r.Validate(); err != nil {
		return ledger.Resource{}, err
	}
	return r, nil
}

// Cost is what one request takes: Cost.Requests units of every Requests
// policy and Cost.Bytes units of every ContentBytes policy. A policy whose
// part is 0 takes nothing and is not decided (its PolicyResult is Skipped).
type Cost struct {
	Requests uint64
	Bytes    uint64
}

// of is the part of c that a policy of unit u takes.
func (c Cost) of(u Unit) uint64 {
	if u == ContentBytes {
		return c.Bytes
	}
	return c.Requests
}

// PolicyResult is what one policy of a Result made of the request.
type PolicyResult struct {
	// Limiter and Policy name the limiter and the policy.
	Limiter, Policy string
	// Unit and Window are the policy's.
	Unit   Unit
	Window time.Duration
	// Key is the key it decided for, in its normal form (ledger.NormalizeKey).
	Key string
	// Amount is how many units the request asked of it; 0 when the cost
	// had nothing in its unit, and then the policy was not decided
	// (Skipped) and Decision holds only the key's Limit.
	Amount uint64
	// Shadow reports that the policy was in shadow mode: its denial did not
	// deny the request.
	Shadow bool
	// Decision is the policy's decision (see ledger.Decision for what is
	// exact): Allowed when its units were taken; when the request was
	// denied, Reason says whether this policy refused (LimitExceeded) or
	// would have fitted (Admitted), and nothing was taken from it.
	Decision ledger.Decision
}

// Skipped reports that the policy was not decided: the request's cost had
// nothing in its unit.
func (p PolicyResult) Skipped() bool { return p.Amount == 0 }

// PolicyOf is the PolicyResult of d, a ledger.Client's decision on part p:
// named after p's resource, with p's key and amount, in the unit of the
// resource's kind (Requests, ContentBytes or CurrencyUnits).
func PolicyOf(p ledger.Part, d ledger.Decision) PolicyResult {
	var pr PolicyResult
	pr.of(&p.Resource, p.Request.User, p.Request.Amount, &d)
	return pr
}

// of makes *pr the PolicyResult of d, a decision on amount units of r for
// key (see PolicyOf), in place: a single-limit recipe's Result holds it.
func (pr *PolicyResult) of(r *ledger.Resource, key string, amount uint64, d *ledger.Decision) {
	*pr = PolicyResult{Limiter: r.Name, Policy: r.Name, Unit: unitOf(r.Kind), Window: r.Window, Amount: amount, Decision: *d}
	pr.Key, _ = ledger.NormalizeKey(key) // "" for a key the decision refused as invalid
}
