package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/recipes"
	"github.com/tblimit/tblimit/service"
)

// What a decision answers on the wire: its proto (decisionOf; the
// protobuf JSON of HTTP answers is its mapping), an HTTP answer's status
// and Retry-After (decided) and RateLimit fields (rateFields, written by
// package recipes), and the error of an amount no limit can admit
// (overLimit). The library's Decision says what a denial reports
// (package ledger); these only encode it.

// reasons maps the library's reasons to the API's.
var reasons = map[ledger.Reason]tblimitv1.Reason{
	ledger.Undecided:         tblimitv1.Reason_REASON_UNSPECIFIED,
	ledger.Admitted:          tblimitv1.Reason_REASON_ADMITTED,
	ledger.LimitExceeded:     tblimitv1.Reason_REASON_LIMIT_EXCEEDED,
	ledger.InsufficientFunds: tblimitv1.Reason_REASON_INSUFFICIENT_FUNDS,
	ledger.Unavailable:       tblimitv1.Reason_REASON_UNAVAILABLE,
}

// decisionOf is the one builder of the API's Decision: d, a decision on
// part p. An HTTP call's answer gets its RateLimit fields from here.
func decisionOf(ctx context.Context, p ledger.Part, d ledger.Decision) *tblimitv1.Decision {
	if f, ok := ctx.Value(rateFieldsKey{}).(*rateFields); ok {
		f.policies = append(f.policies, recipes.PolicyOf(p, d))
	}
	reason := reasons[d.Reason]
	if !d.Allowed && d.Reason == ledger.Admitted {
		reason = tblimitv1.Reason_REASON_UNSPECIFIED // a part that fit, of a chain another part refused
	}
	out := &tblimitv1.Decision{
		Allowed:    d.Allowed,
		Reason:     reason,
		Limit:      d.Limit,
		Remaining:  d.Remaining,
		RetryAfter: durationpb.New(max(d.RetryAfter, 0)),
		ResetAfter: durationpb.New(d.ResetAfter),
	}
	if !d.ID.IsZero() {
		out.Id = d.ID.String()
	}
	if d.Timestamp != 0 {
		out.Time = timestamppb.New(time.Unix(0, int64(d.Timestamp)))
	}
	return out
}

// overLimit is the error of d, a decision on part p, when p's amount
// exceeds the user's whole limit (it can never be admitted): the API
// answers it as an error, not a denial. It is nil for any other decision.
func overLimit(p ledger.Part, d ledger.Decision) error {
	if d.Allowed || d.Reason != ledger.LimitExceeded || d.RetryAfter >= 0 {
		return nil
	}
	return fmt.Errorf("%w: %d exceeds the whole limit %d of %q on %s", service.ErrExceedsLimit, p.Request.Amount, d.Limit, p.Request.User, p.Resource.Name)
}

// rateFieldsKey is the context key of an HTTP call's rateFields.
type rateFieldsKey struct{}

// rateFields gathers the policies of an HTTP call's decisions (decisionOf
// adds them), whose RateLimit-Policy and RateLimit fields its answer
// carries: recipes' encoder writes them, as the library's middlewares'.
type rateFields struct{ policies []recipes.PolicyResult }

func (f *rateFields) write(h http.Header) {
	policy, state := recipes.PolicyFields(f.policies...)
	if policy != "" {
		h.Set("RateLimit-Policy", policy)
	}
	if state != "" {
		h.Set("RateLimit", state)
	}
}

// decided is the HTTP status of an answer, and its Retry-After in seconds
// (0: none): 200 unless a decision denied; then 429 for a limit, with
// Retry-After rounded up to whole seconds (at least 1); 402 for a payment
// short of funds; 503 with Retry-After 1 for a decision the server's
// policy made while the cluster did not answer.
func decided(resp proto.Message) (int, int64) {
	var ds []*tblimitv1.Decision
	switch m := resp.(type) {
	case interface{ GetDecision() *tblimitv1.Decision }:
		ds = []*tblimitv1.Decision{m.GetDecision()}
	case interface{ GetDecisions() []*tblimitv1.Decision }:
		ds = m.GetDecisions()
	}
	code, retry := http.StatusOK, int64(0)
	for _, d := range ds {
		if d.GetAllowed() {
			continue
		}
		switch d.GetReason() {
		case tblimitv1.Reason_REASON_LIMIT_EXCEEDED:
			secs := int64(math.Ceil(d.GetRetryAfter().AsDuration().Seconds()))
			code, retry = http.StatusTooManyRequests, max(retry, secs, 1)
		case tblimitv1.Reason_REASON_INSUFFICIENT_FUNDS:
			return http.StatusPaymentRequired, 0
		case tblimitv1.Reason_REASON_UNAVAILABLE:
			return http.StatusServiceUnavailable, 1
		}
	}
	return code, retry
}
