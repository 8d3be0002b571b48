package recipes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// LLM limits the calls of an AI gateway, per user and model, on three
// limits decided as one chain, all or nothing: tokens per minute, requests
// per minute and tokens per day. A call's cost is known only once the model
// answered, so a call reserves the most it may use (its max tokens) and one
// request, and Settle keeps what it used, each limit until its own window
// ends, and gives the rest back at once. Nothing a call does lowers a limit
// for good.
//
// An LLM is safe for concurrent use.
type LLM struct {
	c     *ledger.Client
	parts []llmPart // in the chain's order: tokens per minute, requests per minute, tokens per day
}

type llmPart struct {
	res    ledger.Resource
	unit   Unit
	tokens bool // takes the call's tokens, not 1
}

// LLMConfig says what an LLM limits, and where it keeps its accounts.
type LLMConfig struct {
	// Name names the limits: 1 to 8 characters of a-z 0-9 - _ . (each
	// limit is Name with -tpm, -rpm or -tpd).
	Name string
	// Ledger is the first of the ledgers the limits keep: one each, in
	// the order tokens per minute, requests per minute, tokens per day,
	// from Ledger on (a limit of 0 keeps none).
	Ledger uint32
	// The limits of each user and model; 0 limits nothing.
	TokensPerMinute, RequestsPerMinute, TokensPerDay uint64
	// Lazy gives a user and model seen for the first time the limits
	// within its first call.
	Lazy bool
}

// NewLLM returns the limits of cfg on c. It does no I/O: call Create once.
func NewLLM(c *ledger.Client, cfg LLMConfig) (*LLM, error) {
	if len(cfg.Name) > 8 {
		return nil, fmt.Errorf("%w: LLM name %q: at most 8 characters", ledger.ErrInvalidResource, cfg.Name)
	}
	l := &LLM{c: c}
	next := cfg.Ledger
	for _, p := range []struct {
		suffix string
		lim    Limit
		unit   Unit
	}{
		{"-tpm", Per(cfg.TokensPerMinute, time.Minute), Tokens},
		{"-rpm", Per(cfg.RequestsPerMinute, time.Minute), Requests},
		{"-tpd", Per(cfg.TokensPerDay, 24*time.Hour), Tokens},
	} {
		if p.lim.N == 0 {
			continue
		}
		r, err := newRecipe(c, Config{Name: cfg.Name + p.suffix, Ledger: next, Lazy: cfg.Lazy}, p.unit, p.lim, 0)
		if err != nil {
			return nil, err
		}
		l.parts = append(l.parts, llmPart{res: r.res, unit: p.unit, tokens: p.unit == Tokens})
		next++
	}
	if len(l.parts) == 0 {
		return nil, fmt.Errorf("%w: LLM %q limits nothing: give it a limit", ledger.ErrInvalidResource, cfg.Name)
	}
	return l, nil
}

// Create creates the limits' ledger accounts in the cluster (idempotent).
func (l *LLM) Create(ctx context.Context) error {
	for _, p := range l.parts {
		if err := l.c.CreateResource(ctx, p.res); err != nil {
			return err
		}
	}
	return nil
}

// Resources returns the resources of the limits, in the chain's order.
func (l *LLM) Resources() []ledger.Resource {
	out := make([]ledger.Resource, len(l.parts))
	for i, p := range l.parts {
		out[i] = p.res
	}
	return out
}

// LLMKey is the user key of user's calls to model on the limits of an LLM.
func LLMKey(user, model string) string { return user + "/" + model }

// Reserve reserves a call of user to model that may use up to maxTokens:
// maxTokens on each token limit and one request, all or none. When a limit
// denies, the call is not OK and its Result says which and when to retry.
// A call that is OK must end with Settle (or Cancel, when the model never
// ran), or its reservation expires with each limit's window: the most it
// may have used then counts until then.
func (l *LLM) Reserve(ctx context.Context, user, model string, maxTokens uint64) (*LLMCall, error) {
	if maxTokens == 0 {
		return nil, fmt.Errorf("%w: a call may use 0 tokens at most: give its max tokens", ledger.ErrInvalidAmount)
	}
	key := LLMKey(user, model)
	parts := make([]ledger.Part, len(l.parts))
	for i, p := range l.parts {
		n := uint64(1)
		if p.tokens {
			n = maxTokens
		}
		parts[i] = ledger.Part{Resource: p.res, Request: ledger.Request{User: key, Amount: n}}
	}
	rvs, err := l.c.ReserveAll(ctx, parts)
	if err != nil {
		return nil, err
	}
	call := &LLMCall{l: l, key: key, max: maxTokens, rvs: rvs}
	policies := make([]PolicyResult, len(rvs))
	for i, rv := range rvs {
		policies[i] = PolicyResult{Policy: l.parts[i].res.Name, Unit: l.parts[i].unit, Window: l.parts[i].res.Window,
			Amount: parts[i].Request.Amount, Decision: rv.Decision()}
	}
	allowed, reason := rvs[0].OK(), ledger.Admitted
	for _, rv := range rvs {
		if r := rv.Decision().Reason; !allowed && r != ledger.Admitted {
			reason = r // the limit that denied, or Unavailable
			break
		}
	}
	call.res = NewResult(allowed, reason, policies)
	return call, nil
}

// LLMCall is a reserved call of an LLM.
type LLMCall struct {
	l   *LLM
	key string
	max uint64
	rvs []*ledger.Reservation
	res Result
}

// OK reports whether the call was reserved.
func (c *LLMCall) OK() bool { return c.res.Allowed }

// Result is the decision on the call: every limit's, with what is left and
// when to retry, as the middlewares' RateLimit fields report it.
func (c *LLMCall) Result() Result { return c.res }

// Settle records that the call used used tokens: each token limit keeps
// them until its window ends and gets the rest of the reservation back at
// once, and the request limit keeps the request. Tokens beyond the call's
// max tokens are charged (ledger.Client.Charge): recorded even past a
// limit. A Settle retried with the same used, after a lost reply, is
// applied once.
func (c *LLMCall) Settle(ctx context.Context, used uint64) error {
	if !c.OK() {
		return fmt.Errorf("%w: the call was denied: there is nothing to settle", ledger.ErrReservationEnded)
	}
	var errs []error
	for i, rv := range c.rvs {
		p := c.l.parts[i]
		var err error
		switch {
		case !p.tokens:
			err = rv.Commit(ctx)
		case used == 0:
			err = rv.Cancel(ctx)
		default:
			err = rv.CommitN(ctx, min(used, c.max))
		}
		if err == nil && p.tokens && used > c.max {
			_, err = c.l.c.Charge(ctx, p.res, ledger.Request{User: c.key, Amount: used - c.max})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.res.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Cancel gives the whole reservation back: for a call the model never ran.
func (c *LLMCall) Cancel(ctx context.Context) error {
	var errs []error
	for _, rv := range c.rvs {
		errs = append(errs, rv.Cancel(ctx))
	}
	return errors.Join(errs...)
}

// LLMCallFunc says who calls which model with how many tokens at most, from
// a request; an empty user is a bad request.
type LLMCallFunc func(*http.Request) (user, model string, maxTokens uint64)

// LLMUsedFunc says how many tokens a call used, from the handler's response
// headers (a header or trailer the handler set, such as a proxy copying the
// upstream's usage). ok false means the call did not reach the model:
// nothing is kept but the request.
type LLMUsedFunc func(h http.Header) (used uint64, ok bool)

// TokensUsedHeader is the response header (or trailer) that
// UsedFromHeader reads.
const TokensUsedHeader = "X-Tokens-Used"

// UsedFromHeader reads the tokens a call used from TokensUsedHeader.
func UsedFromHeader(h http.Header) (uint64, bool) {
	n, err := strconv.ParseUint(h.Get(TokensUsedHeader), 10, 64)
	return n, err == nil
}

// LLMMiddleware limits an LLM proxy's handler with l: it reserves each
// call's max tokens before the handler runs (denied: 429 with Retry-After
// and the RateLimit fields, and the handler is not called), and settles the
// reservation to what used reads from the response once the handler
// returned. Errors answer as Middleware's do.
func LLMMiddleware(l *LLM, call LLMCallFunc, used LLMUsedFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user, model, maxTokens := call(r)
			if user == "" || model == "" {
				http.Error(w, "no rate-limit key in the request", http.StatusBadRequest)
				return
			}
			c, err := l.Reserve(r.Context(), user, model, maxTokens)
			if err != nil {
				httpError(w, err)
				return
			}
			writeRateLimit(w.Header(), c.Result())
			if !c.OK() {
				deny(w, c.Result())
				return
			}
			next.ServeHTTP(w, r)
			// The call is over: settle it even if the client went away.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
			defer cancel()
			if n, ok := used(w.Header()); ok {
				_ = c.Settle(ctx, n) // unsettled, the reservation counts its max until its windows end
			} else {
				_ = c.Settle(ctx, 0)
			}
		})
	}
}
