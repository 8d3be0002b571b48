package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/recipes"
)

// contender is one limiter in the comparison.
type contender struct {
	name      string
	semantics semantics
	inProcess bool   // everything runs in this process: allocations say it all
	notRun    string // why it does not run, or ""
	shared    bool   // runs on the shared real server
	// leaseLifetime is τ of a contender with leases: see windowBounds.
	leaseLifetime time.Duration
	// limits, when set, are the limits of every key, in place of the
	// workload's one (the rows of two limits per key, which run on the Zipf mix
	// only).
	limits []limitSpec
	// onlyNamed rows run only when -contenders names them (the API rows:
	// scripts/bench.sh --api).
	onlyNamed bool
	// warmOnly rows run on the warm workloads only (hot, zipf): not on the
	// arrivals, whose keys nothing provisions.
	warmOnly bool
	// setup builds a fresh limiter for one cell, with every key known
	// (provisioned, created) before the clock starts on the warm workloads
	// (hot, zipf), and nothing at all for any key on the arrivals (churn,
	// fresh), whose keys are first seen in the cell.
	setup func(ctx context.Context, c cell) (*instance, error)
}

// cell is one measurement: a workload, a number of callers, a contender.
type cell struct {
	id      int // unique in the run: keeps cells apart on shared servers
	w       *workload
	callers int
	window  time.Duration
	keys    []string // key names, "user-<i>"
}

// instance is a contender set up for one cell.
type instance struct {
	allow func(ctx context.Context, key int) (bool, error)
	// ops returns the requests and events per operation so far, as the
	// engine counted them (server) or as they were sent (client), or nil.
	ops func() map[string]opCount
	// clientOps returns what the ledger.Client of a tblimit row sent so
	// far (its Stats), or nil: the engine-independent count.
	clientOps func() map[string]opCount
	// opsSource names what ops counts, when it is neither the engine (an
	// in-process row) nor the client calls (a real-server row).
	opsSource string
	// model returns what a modelled row's client did so far, or is nil.
	model func() modelCount
	close func()
}

// opCount is the requests (or calls) of one operation and the events they carried.
type opCount struct {
	Requests uint64 `json:"requests"`
	Events   uint64 `json:"events"`
}

func (o opCount) sub(p opCount) opCount {
	return opCount{Requests: o.Requests - p.Requests, Events: o.Events - p.Events}
}

// leaseLifetime is τ of the rows with leases (ledger.Leases' default); their
// K is ledger's default, leaseUnits.
const leaseLifetime = 100 * time.Millisecond

// leaseUnits is K, the most units of one lease, for a key of limit units:
// ledger.Leases' default, a tenth of the limit, at least 1.
func leaseUnits(limit uint64) uint64 { return max(1, limit/10) }

// withLeases is the option of the "+leases" rows.
func withLeases() ledger.Option { return ledger.WithLeases(ledger.Leases{Lifetime: leaseLifetime}) }

// windowBounds are the per-window bounds of a sliding window contender for
// a key of limit units per window (checkWindows): at most limit in any
// window; with leases, at most limit in any W−τ and limit + K in any W
// (one process, K = limit/10; see ledger.WithLeases).
func (c *contender) windowBounds(limit uint64, window time.Duration) []windowBound {
	if c.limits != nil {
		return limitBounds(c.limits)
	}
	if c.leaseLifetime == 0 {
		return []windowBound{{window, limit}}
	}
	return []windowBound{{window - c.leaseLifetime, limit}, {window, limit + leaseUnits(limit)}}
}

// tblimit on the embedded engine: the request-rate recipe, as a user writes
// it, on a ledger.Client with opts.
func tblimitEmbedded(name string, sem semantics, opts ...ledger.Option) *contender {
	return &contender{
		name: name, semantics: sem, inProcess: true,
		setup: func(ctx context.Context, c cell) (*instance, error) {
			e := embedded.New()
			inst, err := tblimitSetup(ctx, ledger.New(e, opts...), 1, c)
			if err != nil {
				e.Close()
				return nil, err
			}
			inst.ops = func() map[string]opCount { return engineOps(e.Stats()) }
			inst.close = e.Close
			return inst, nil
		},
	}
}

// tblimitSetup creates a request-rate limit on ledger l of c, a Lazy
// resource, with every key of the cell provisioned on a warm workload and
// none on the arrivals (each key is provisioned by its first decision), and
// returns its Allow.
func tblimitSetup(ctx context.Context, cl *ledger.Client, l uint32, c cell) (*instance, error) {
	rl, err := recipes.NewRequestRate(cl, recipes.Config{Name: "bench", Ledger: l, Lazy: true}, recipes.Per(c.w.limit, c.window))
	if err != nil {
		return nil, err
	}
	if err := rl.Create(ctx); err != nil {
		return nil, err
	}
	if !c.w.arrivals() {
		users := make([]ledger.UserLimit, c.w.users)
		for i := range users {
			users[i] = ledger.UserLimit{Key: c.keys[i], Limit: c.w.limit}
		}
		if err := cl.Provision(ctx, rl.Resource(), users...); err != nil {
			return nil, fmt.Errorf("provision %d users: %w", len(users), err)
		}
	}
	keys := c.keys
	return &instance{
		allow: func(ctx context.Context, k int) (bool, error) {
			d, err := rl.Allow(ctx, keys[k])
			return d.Allowed, err
		},
		clientOps: func() map[string]opCount { return ledgerOps(cl.Stats()) },
	}, nil
}

// ledgerOps is what a ledger.Client sent, by operation.
func ledgerOps(s ledger.Stats) map[string]opCount {
	return map[string]opCount{
		"create_accounts":       opCount(s.CreateAccounts),
		"create_transfers":      opCount(s.CreateTransfers),
		"lookup_accounts":       opCount(s.LookupAccounts),
		"lookup_transfers":      opCount(s.LookupTransfers),
		"get_account_transfers": opCount(s.GetAccountTransfers),
		"query_accounts":        opCount(s.QueryAccounts),
	}
}

func engineOps(s embedded.Stats) map[string]opCount {
	return map[string]opCount{
		"create_accounts":       opCount(s.CreateAccounts),
		"create_transfers":      opCount(s.CreateTransfers),
		"lookup_accounts":       opCount(s.LookupAccounts),
		"lookup_transfers":      opCount(s.LookupTransfers),
		"get_account_transfers": opCount(s.GetAccountTransfers),
		"get_account_balances":  opCount(s.GetAccountBalances),
		"query_accounts":        opCount(s.QueryAccounts),
		"query_transfers":       opCount(s.QueryTransfers),
	}
}

// rawEngine issues the same pending transfers on the embedded engine
// directly: one CreateTransfers of one transfer per decision, no ledger
// layer. The in-process ceiling for tblimit's work per decision.
func rawEngine() *contender {
	return &contender{
		name: "raw engine", semantics: slidingLog, inProcess: true,
		setup: func(ctx context.Context, c cell) (*instance, error) {
			e := embedded.New()
			inst, err := rawSetup(e, 1, c)
			if err != nil {
				e.Close()
				return nil, err
			}
			inst.ops = func() map[string]opCount { return engineOps(e.Stats()) }
			inst.close = e.Close
			return inst, nil
		},
	}
}

// xRate is golang.org/x/time/rate, one token bucket per key (burst = limit,
// refilled at limit per window), found by key in a sync.Map: the in-memory
// reference. On the arrivals, each key's bucket is made by its first
// decision.
func xRate() *contender {
	return &contender{
		name: "x/time/rate", semantics: bucket, inProcess: true,
		setup: func(ctx context.Context, c cell) (*instance, error) {
			every := rate.Limit(float64(c.w.limit) / c.window.Seconds())
			burst := int(c.w.limit)
			var m sync.Map
			if !c.w.arrivals() {
				for _, k := range c.keys[:c.w.users] {
					m.Store(k, rate.NewLimiter(every, burst))
				}
			}
			keys := c.keys
			return &instance{allow: func(ctx context.Context, k int) (bool, error) {
				v, ok := m.Load(keys[k])
				if !ok {
					v, _ = m.LoadOrStore(keys[k], rate.NewLimiter(every, burst))
				}
				return v.(*rate.Limiter).Allow(), nil
			}}, nil
		},
	}
}

// redisRate is go-redis/redis_rate (GCRA in a Lua script) on a local Redis,
// with burst = limit and rate = limit per window. Each cell has its own key
// prefix on a flushed database. Keys need nothing before their first call;
// on the arrivals, a key's prefixed name is made by each call, not all
// before the clock starts.
func redisRate(addr, notRun string, poolSize int) *contender {
	c := &contender{name: "redis_rate", semantics: bucket, notRun: notRun}
	if notRun != "" {
		return c
	}
	if addr == "" {
		c.notRun = "no Redis address (-redis)"
		return c
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err := rdb.Ping(ctx).Err()
	cancel()
	rdb.Close()
	if err != nil {
		c.notRun = fmt.Sprintf("Redis at %s does not answer: %v", addr, err)
		return c
	}
	c.setup = func(ctx context.Context, cl cell) (*instance, error) {
		opts := &redis.Options{Addr: addr}
		if poolSize > 0 {
			opts.PoolSize = poolSize
		} else if poolSize < 0 {
			opts.PoolSize = cl.callers // one connection per caller
		}
		rdb := redis.NewClient(opts)
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			rdb.Close()
			return nil, err
		}
		lim := redis_rate.NewLimiter(rdb)
		limit := redis_rate.Limit{Rate: int(cl.w.limit), Burst: int(cl.w.limit), Period: cl.window}
		prefix := fmt.Sprintf("c%d:", cl.id)
		name := func(k int) string { return prefix + cl.keys[k] }
		if !cl.w.arrivals() {
			keys := make([]string, cl.w.users)
			for i := range keys {
				keys[i] = prefix + cl.keys[i]
			}
			name = func(k int) string { return keys[k] }
		}
		return &instance{
			allow: func(ctx context.Context, k int) (bool, error) {
				res, err := lim.Allow(ctx, name(k), limit)
				if err != nil {
					return false, err
				}
				return res.Allowed > 0, nil
			},
			close: func() { rdb.Close() },
		}, nil
	}
	return c
}
