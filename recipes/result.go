package recipes

import (
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

var (
	// ErrExceedsLimit means a Wait can never be admitted: its cost is more
	// than a policy's whole limit.
	ErrExceedsLimit = errors.New("recipes: the cost exceeds a policy's whole limit")
	// ErrWouldExceedDeadline means a Wait returned at once because its
	// context's deadline comes before the earliest instant it could be
	// admitted.
	ErrWouldExceedDeadline = errors.New("recipes: admission would come after the context's deadline")
)

// Result is the decision of a limiter on one request: of a Limiter, a
// Stack or a Group, made as one linked chain of holds, one per policy
// decided (every hold was taken, or none), and of a single-limit recipe
// (RequestRate, Bandwidth, MoneyPerWindow), a limiter of one policy. It is
// the one answer of the package, and of the clients of rate limit services
// (service/ratelimit's Limiter). A denial is a Result with Allowed false,
// not an error. NewResult makes one.
type Result struct {
	// Allowed reports whether the request may go ahead: no enforcing
	// policy denied it (policies in shadow mode never deny), or the cluster
	// was unavailable and the limiter fails open.
	Allowed bool
	// Reason is Admitted, LimitExceeded (an enforcing policy denied) or
	// Unavailable (the cluster did not answer; Allowed says what the
	// failure policy made of it).
	Reason ledger.Reason
	// DeniedBy names the first enforcing policy that denied, or is "".
	DeniedBy string
	// RetryAfter is, when denied, how long until every denying policy
	// could admit the same cost (the latest of their RetryAfter); negative
	// when a policy's whole limit is less than the cost.
	RetryAfter time.Duration
	// ShadowDenied names the policies in shadow mode that would have
	// denied the request. Each was left out of the chain, which was then
	// decided again without it (one more create request per round).
	ShadowDenied []string
	// ShadowFailed names the policies in shadow mode that could not be
	// decided and were left out: the key their limiter was given is not a
	// valid key, or it is unknown to a policy that is not Lazy, or (when
	// every policy decided is in shadow mode) the cluster did not answer.
	// A policy in shadow mode never fails a request.
	ShadowFailed []string
	// policies has a PolicyResult per policy, in the order of the limiters
	// and their policies (see Policies); nil for a single-limit recipe's,
	// whose one policy is one (and single set).
	policies []PolicyResult
	one      [1]PolicyResult
	single   bool
	// Limit, Remaining and ResetAfter are the tightest enforcing policy's
	// (see ledger.Decision): the first that refused when the limit denied
	// the request, else the one with the least of its limit left; zero
	// when no enforcing policy was decided. For a single-limit recipe they
	// are its one policy's.
	Limit, Remaining uint64
	ResetAfter       time.Duration
	// ID and Timestamp are the tightest policy's decision's: for a
	// single-limit recipe, the request's ID (the caller's, or the one the
	// Client gave it) and the cluster time of the decision.
	ID        ledger.ID
	Timestamp uint64
}

// NewResult returns the Result of a decision on policies, each with its
// Decision, in order: allowed and reason are the verdict, and the rest is
// worked out from the policies. When denied by the limit (reason
// LimitExceeded), DeniedBy is the first enforcing policy whose Decision
// refused and RetryAfter the latest RetryAfter of those that did (negative
// if any is); ShadowDenied names the policies in shadow mode whose
// Decision refused; Limit, Remaining, ResetAfter, ID and Timestamp are the
// tightest policy's. Every Result of the package is made by it, and a
// client of another limiter (a rate limit service's, say) makes its own
// with it.
func NewResult(allowed bool, reason ledger.Reason, policies []PolicyResult) Result {
	return newResult(allowed, reason, policies, nil)
}

// newResult is NewResult of a chain that left out failed, policies in
// shadow mode it could not decide (ShadowFailed).
func newResult(allowed bool, reason ledger.Reason, policies []PolicyResult, failed []string) Result {
	res := Result{Allowed: allowed, Reason: reason, ShadowFailed: failed, policies: policies}
	res.summarize(policies)
	return res
}

// Policies returns a PolicyResult per policy decided, in the order of the
// limiters and their policies: one for a single-limit recipe (RequestRate,
// Bandwidth, MoneyPerWindow). The slice is r's own: a copy of r made later
// has its own.
func (r *Result) Policies() []PolicyResult {
	if r.single {
		return r.one[:]
	}
	return r.policies
}

// summarize works out r's DeniedBy, RetryAfter, ShadowDenied and the
// tightest policy's numbers from policies, r's (see NewResult).
func (r *Result) summarize(policies []PolicyResult) {
	allowed, reason := r.Allowed, r.Reason
	denier := -1
	for i, p := range policies {
		switch {
		case p.Decision.Reason != ledger.LimitExceeded:
		case p.Shadow:
			r.ShadowDenied = append(r.ShadowDenied, p.Policy)
		case !allowed && reason == ledger.LimitExceeded:
			if denier < 0 {
				denier, r.DeniedBy = i, p.Policy
			}
			r.RetryAfter = laterRetry(r.RetryAfter, p.Decision.RetryAfter)
		}
	}
	if i := tightest(policies, denier); i >= 0 {
		d := policies[i].Decision
		r.Limit, r.Remaining, r.ResetAfter, r.ID, r.Timestamp = d.Limit, d.Remaining, d.ResetAfter, d.ID, d.Timestamp
	}
}

// tightest is the index of the tightest enforcing policy decided: denier,
// the one that denied the request, if any (not negative), else the one
// with the least of its limit left, the first of equals; -1 when there is
// none.
func tightest(policies []PolicyResult, denier int) int {
	if denier >= 0 {
		return denier
	}
	best := -1
	for i, p := range policies {
		if !p.Shadow && !p.Skipped() && (best < 0 || lessLeft(p.Decision, policies[best].Decision)) {
			best = i
		}
	}
	return best
}

// lessLeft reports whether a has less of its limit left than b:
// a.Remaining/a.Limit < b.Remaining/b.Limit, multiplied out in 128 bits.
func lessLeft(a, b ledger.Decision) bool {
	ah, al := bits.Mul64(a.Remaining, b.Limit)
	bh, bl := bits.Mul64(b.Remaining, a.Limit)
	return ah < bh || ah == bh && al < bl
}

// laterRetry is the later of two RetryAfters, negative (never) winning.
func laterRetry(a, b time.Duration) time.Duration {
	if a < 0 || b < 0 {
		return -1
	}
	return max(a, b)
}

// Outcome classifies a decision for metrics.
type Outcome uint8

const (
	// OutcomeAdmitted: allowed, and no shadow policy would have denied.
	OutcomeAdmitted Outcome = iota
	// OutcomeDenied: an enforcing policy denied.
	OutcomeDenied
	// OutcomeShadowDenied: allowed, but a policy in shadow mode would have
	// denied.
	OutcomeShadowDenied
	// OutcomeUnavailable: the cluster did not answer in time.
	OutcomeUnavailable
	// OutcomeError: the call failed otherwise (bad input, unknown user).
	OutcomeError
)

// String returns "admitted", "denied", "shadow-denied", "unavailable" or
// "error".
func (o Outcome) String() string {
	switch o {
	case OutcomeAdmitted:
		return "admitted"
	case OutcomeDenied:
		return "denied"
	case OutcomeShadowDenied:
		return "shadow-denied"
	case OutcomeUnavailable:
		return "unavailable"
	case OutcomeError:
		return "error"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Observer is told of every decision of the Limiters, Stacks and Groups it
// is given to (WithObserver): one Event per decision, its Result covering
// every policy. A ledger.Observer, given to the ledger.Client, sees the
// same decisions resource by resource (one event per policy decided), and
// the single-limit recipes' too, which have no Observer of their own.
// Package metrics implements both for Prometheus, and a tracer can too.
// ObserveResult is called on the deciding goroutine once the decision is
// made: it must be quick and safe for concurrent use.
type Observer interface {
	ObserveResult(Event)
}

// Event is one decision as an Observer sees it.
type Event struct {
	// Limiter names the Limiter, Stack or Group that decided.
	Limiter string
	// Result is the decision (the zero Result, or what is known, when Err
	// is not nil).
	Result Result
	// Err is the error the call returned, if any.
	Err error
	// Took is how long the decision took.
	Took time.Duration
}

// Outcome classifies e.
func (e Event) Outcome() Outcome {
	switch {
	case e.Err != nil && errors.Is(e.Err, ledger.ErrUnavailable), e.Result.Reason == ledger.Unavailable:
		return OutcomeUnavailable
	case e.Err != nil:
		return OutcomeError
	case !e.Result.Allowed:
		return OutcomeDenied
	case len(e.Result.ShadowDenied) > 0:
		return OutcomeShadowDenied
	}
	return OutcomeAdmitted
}
