package recipes

import (
	"context"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// Usage is a user's state on a limit; see ledger.Usage.
type Usage = ledger.Usage

// Config names the TigerBeetle ledger a recipe (RequestRate, Bandwidth,
// MoneyPerWindow, Concurrency) keeps its accounts on.
type Config struct {
	// Name identifies the limit: 1 to 12 characters of a-z 0-9 - _ .
	Name string
	// Ledger is the TigerBeetle ledger number, one per limit.
	Ledger uint32
	// Lazy gives a user seen for the first time the default limit within
	// its first decision, instead of ErrUnknownUser (not for money).
	Lazy bool
}

// recipe is what the single-limit recipes (RequestRate, Bandwidth,
// MoneyPerWindow, Concurrency) share: one resource on one Client. A
// Limiter is the composable form: several policies per key; a recipe is a
// limiter of one policy, and answers with a Result as a Limiter does.
type recipe struct {
	c   *ledger.Client
	res ledger.Resource
}

// newRecipe returns the recipe of limit l in cfg, counting unit (which
// says its resource's kind).
func newRecipe(c *ledger.Client, cfg Config, unit Unit, l Limit, currency uint32) (recipe, error) {
	if err := l.Validate(); err != nil {
		return recipe{}, err
	}
	res := ledger.Resource{
		Name: cfg.Name, Ledger: cfg.Ledger, Kind: unit.kind(), Window: l.Window,
		DefaultLimit: l.N, Lazy: cfg.Lazy, Currency: currency,
	}
	if err := res.Validate(); err != nil {
		return recipe{}, err
	}
	return recipe{c: c, res: res}, nil
}

// result makes *res the Result of d, the recipe's decision on amount
// units for key: a Result of one policy, the recipe's, named after its
// resource.
// Its one PolicyResult is PolicyOf's, kept in the Result itself (see
// Result.Policies) and made in place: the answer is large, and copying it
// took a tenth of a decision's time.
func (l *recipe) result(res *Result, key string, amount uint64, d *ledger.Decision) {
	*res = Result{Allowed: d.Allowed, Reason: d.Reason, single: true}
	res.one[0].of(&l.res, key, amount, d)
	res.summarize(res.one[:])
}

// Resource returns the limit's definition in the ledger.
func (l *recipe) Resource() ledger.Resource { return l.res }

// Create creates the limit's ledger accounts in the cluster. It is
// idempotent; it fails with ledger.ErrResourceMismatch if the ledger holds a
// different limit.
func (l *recipe) Create(ctx context.Context) error { return l.c.CreateResource(ctx, l.res) }

// AddUser provisions user key with the default limit (exactly once however
// often it runs).
func (l *recipe) AddUser(ctx context.Context, key string) error {
	return l.c.Provision(ctx, l.res, ledger.UserLimit{Key: key, Limit: l.res.DefaultLimit})
}

// SetLimit gives user key its own limit (units per window; for a
// Concurrency, requests in flight), provisioning the user if needed (see
// ledger.Client.SetLimit for how a lower limit takes effect).
func (l *recipe) SetLimit(ctx context.Context, key string, n uint64) error {
	return l.c.Provision(ctx, l.res, ledger.UserLimit{Key: key, Limit: n})
}

// Inspect returns user key's limit, units in flight and when they return.
func (l *recipe) Inspect(ctx context.Context, key string) (Usage, error) {
	return l.c.Inspect(ctx, l.res, key)
}

// Peek reports what user key has left, taking nothing, as Limiter.Peek
// does for each of its policies: it is Inspect, under the name every
// recipe gives it.
func (l *recipe) Peek(ctx context.Context, key string) (Usage, error) {
	return l.c.Inspect(ctx, l.res, key)
}

// Reset gives back at once every unit user key holds, as an operator's
// act that the audit trail shows (see ledger.Client.Reset), and returns
// how many holds it ended.
func (l *recipe) Reset(ctx context.Context, key string) (int, error) {
	return l.c.Reset(ctx, l.res, key)
}

// allowN decides n units for user key (see RequestRate.AllowN).
func (l *recipe) allowN(ctx context.Context, key string, n uint64) (res Result, err error) {
	d, err := l.c.Acquire(ctx, l.res, ledger.Request{User: key, Amount: n})
	l.result(&res, key, n, &d)
	return res, err
}

// waitN blocks until user key is admitted n units (see Limiter.WaitCost).
func (l *recipe) waitN(ctx context.Context, key string, n uint64) (Result, error) {
	var res Result
	err := waitLoop(ctx, l.res.Name, sleepCtx, func() (refusal, error) {
		var err error
		res, err = l.allowN(ctx, key, n)
		return refusal{admitted: res.Allowed, unavailable: res.Reason == ledger.Unavailable, retryAfter: res.RetryAfter, by: l.res.Name}, err
	})
	return res, err
}

// Window returns how long an admitted unit counts against the limit.
func (l *recipe) Window() time.Duration { return l.res.Window }
