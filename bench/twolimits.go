package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/recipes"
)

// The rows of two limits per key: every key has two limits, 10 per second
// and 100 per minute, whatever -zipf-limit and -window say, decided
// all-or-nothing (a request denied by one limit takes nothing from the
// other). They run on the Zipf mix only.

// limitSpec is one limit of every key: n per window.
type limitSpec struct {
	n      uint64
	window time.Duration
}

// twoLimits are the limits of the rows of two limits per key.
var twoLimits = []limitSpec{{10, time.Second}, {100, time.Minute}}

// twoLimitsSuffix ends the name of every row of two limits per key.
const twoLimitsSuffix = " 2 limits"

// twoLimitContenders are tblimit (a recipes.Limiter of two policies, one
// chain per decision) on the embedded engine and on the model of a real
// server, two x/time/rate limiters per key, and redis_rate with two limits.
func twoLimitContenders(redisAddr, redisNotRun string, poolSize int) []*contender {
	embeddedRow := &contender{name: "tblimit/embedded" + twoLimitsSuffix, semantics: slidingLog, inProcess: true, limits: twoLimits,
		setup: func(ctx context.Context, c cell) (*instance, error) {
			e := embedded.New()
			inst, err := twoLimitSetup(ctx, ledger.New(e), c)
			if err != nil {
				e.Close()
				return nil, err
			}
			inst.ops = func() map[string]opCount { return engineOps(e.Stats()) }
			inst.close = e.Close
			return inst, nil
		}}
	modelledRow := &contender{name: "tblimit/modelled" + twoLimitsSuffix, semantics: slidingLog, inProcess: true, limits: twoLimits,
		setup: func(ctx context.Context, c cell) (*instance, error) {
			return modelledSetup(func(sc *simnet.Client) (*instance, error) { return twoLimitSetup(ctx, ledger.New(sc), c) })
		}}
	redisRow := redisRate(redisAddr, redisNotRun, poolSize)
	redisRow.name, redisRow.limits = "redis_rate"+twoLimitsSuffix, twoLimits
	if redisRow.setup != nil {
		redisRow.setup = func(ctx context.Context, cl cell) (*instance, error) {
			return redisTwoSetup(ctx, redisAddr, poolSize, cl)
		}
	}
	return []*contender{embeddedRow, modelledRow, xRateTwo(), redisRow}
}

// twoLimitSetup is a recipes.Limiter of the two limits on cl, with every
// key of the cell provisioned on both.
func twoLimitSetup(ctx context.Context, cl *ledger.Client, c cell) (*instance, error) {
	var policies []recipes.Policy
	for i, l := range twoLimits {
		policies = append(policies, recipes.Policy{Name: fmt.Sprintf("bench-%v", l.window), Ledger: uint32(i + 1), Limit: recipes.Per(l.n, l.window), Lazy: true})
	}
	lim, err := recipes.NewLimiter(cl, "bench", policies)
	if err != nil {
		return nil, err
	}
	if err := lim.Create(ctx); err != nil {
		return nil, err
	}
	for i, r := range lim.Resources() {
		users := make([]ledger.UserLimit, c.w.users)
		for k := range users {
			users[k] = ledger.UserLimit{Key: c.keys[k], Limit: twoLimits[i].n}
		}
		if err := cl.Provision(ctx, r, users...); err != nil {
			return nil, fmt.Errorf("provision %d users: %w", len(users), err)
		}
	}
	keys := c.keys
	return &instance{
		allow: func(ctx context.Context, k int) (bool, error) {
			r, err := lim.Allow(ctx, keys[k])
			return r.Allowed, err
		},
		clientOps: func() map[string]opCount { return ledgerOps(cl.Stats()) },
	}, nil
}

// xRateTwo is two golang.org/x/time/rate limiters per key (burst = limit,
// refilled at limit per window), all-or-nothing: a reservation on each,
// both cancelled (their tokens given back) unless both are ready now.
func xRateTwo() *contender {
	return &contender{
		name: "x/time/rate" + twoLimitsSuffix, semantics: bucket, inProcess: true, limits: twoLimits,
		setup: func(ctx context.Context, c cell) (*instance, error) {
			newPair := func() *[2]*rate.Limiter {
				var p [2]*rate.Limiter
				for i, l := range twoLimits {
					p[i] = rate.NewLimiter(rate.Limit(float64(l.n)/l.window.Seconds()), int(l.n))
				}
				return &p
			}
			var m sync.Map
			for _, k := range c.keys[:c.w.users] {
				m.Store(k, newPair())
			}
			keys := c.keys
			return &instance{allow: func(ctx context.Context, k int) (bool, error) {
				v, ok := m.Load(keys[k])
				if !ok {
					v, _ = m.LoadOrStore(keys[k], newPair())
				}
				p := v.(*[2]*rate.Limiter)
				now := time.Now()
				var rs [2]*rate.Reservation
				for i, l := range p {
					rs[i] = l.ReserveN(now, 1)
					if !rs[i].OK() || rs[i].DelayFrom(now) > 0 {
						for j := i; j >= 0; j-- {
							rs[j].CancelAt(now)
						}
						return false, nil
					}
				}
				return true, nil
			}}, nil
		},
	}
}

// redisTwoSetup is redis_rate with two limits per key, all-or-nothing as
// far as redis_rate allows: the first limit is asked, then the second; if
// the second denies, the first is given its unit back (AllowN with -1,
// which moves the GCRA's theoretical arrival time back). Each decision is
// one or two round trips, three when the second limit denies.
func redisTwoSetup(ctx context.Context, addr string, poolSize int, cl cell) (*instance, error) {
	opts := &redis.Options{Addr: addr}
	if poolSize > 0 {
		opts.PoolSize = poolSize
	} else if poolSize < 0 {
		opts.PoolSize = cl.callers
	}
	rdb := redis.NewClient(opts)
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		rdb.Close()
		return nil, err
	}
	lim := redis_rate.NewLimiter(rdb)
	var limits [2]redis_rate.Limit
	keys := make([][2]string, cl.w.users)
	for i, l := range twoLimits {
		limits[i] = redis_rate.Limit{Rate: int(l.n), Burst: int(l.n), Period: l.window}
		for k := range keys {
			keys[k][i] = fmt.Sprintf("c%d:%d:%s", cl.id, i, cl.keys[k])
		}
	}
	return &instance{
		allow: func(ctx context.Context, k int) (bool, error) {
			res, err := lim.Allow(ctx, keys[k][0], limits[0])
			if err != nil || res.Allowed == 0 {
				return false, err
			}
			res, err = lim.Allow(ctx, keys[k][1], limits[1])
			if err != nil || res.Allowed > 0 {
				return err == nil, err
			}
			_, err = lim.AllowN(ctx, keys[k][0], limits[0], -1)
			return false, err
		},
		close: func() { rdb.Close() },
	}, nil
}

// expectLimits is what a limiter of semantics s with limits should have
// admitted over elapsed, at most: for each key, the least of what each
// limit alone would allow (see expect).
func expectLimits(s semantics, attempts []uint64, limits []limitSpec, elapsed time.Duration) expectation {
	e := expectation{Kind: "at most"}
	for _, a := range attempts {
		bound := a
		for _, l := range limits {
			if s == bucket {
				bound = min(bound, l.n+uint64(float64(l.n)*elapsed.Seconds()/l.window.Seconds()))
			} else {
				bound = min(bound, l.n*(uint64(elapsed/l.window)+1))
			}
		}
		e.Value += bound
		if s == bucket && a > bound {
			e.Slack++ // the rounding of a bucket's refill
		}
	}
	return e
}

// limitBounds are the per-window bounds of a sliding window contender of
// limits: at most n in any interval of each window.
func limitBounds(limits []limitSpec) []windowBound {
	var out []windowBound
	for _, l := range limits {
		out = append(out, windowBound{l.window, l.n})
	}
	return out
}

// twoLimitsText says the ratios of the rows of two limits per key: tblimit's
// decisions/s over each peer's, by callers.
func (rep *report) twoLimitsText(w io.Writer) {
	var lines []string
	for _, q := range rep.Ratios {
		if strings.HasSuffix(q.Tblimit, twoLimitsSuffix) {
			lines = append(lines, fmt.Sprintf("  %s, %d callers: %s ÷ %s = %.3g", q.Workload, q.Callers,
				strings.TrimSuffix(q.Tblimit, twoLimitsSuffix), strings.TrimSuffix(q.Peer, twoLimitsSuffix), q.Ratio))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\ntwo limits per key (10 per second and 100 per minute), all-or-nothing: decisions/s")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w, `tblimit: one recipes.Limiter of two policies, one linked chain of two pending transfers per
  decision; x/time/rate: two limiters per key, both reserved and both cancelled unless both
  are ready; redis_rate: two GCRA calls, the first refunded (AllowN -1) when the second
  denies. Their rows' "expected" is the least of what each limit alone allows.`)
}
