package ledger

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Leases configures WithLeases.
type Leases struct {
	// Lifetime is how long a lease admits locally (τ). Default 100ms.
	Lifetime time.Duration
	// MaxUnits caps a lease (K). Default: a tenth of the user's limit, at
	// least 1.
	MaxUnits uint64
}

// WithLeases lets a Client take a lease of several units for a user as one
// pending transfer and admit that user's later calls from it locally, for a
// short lifetime τ, without any I/O. The lease's size follows the user's
// recent demand (its rate times τ, capped at MaxUnits), so a user that calls
// rarely gets leases of exactly what it asks: leases only pay off for hot
// users. When a lease ends with units unused, they are given back at once.
//
// The guarantee is bounded, not exact. A unit admitted from a lease returns
// one window after the lease was taken, which may be up to τ earlier than
// one window after the unit was admitted. So:
//   - in any interval of length W−τ at most the limit is admitted, and
//   - in any window W at most the limit plus what leases taken before the
//     window admit in its first τ: at most P×K more, for P processes each
//     holding at most one lease of at most K units for the user.
//
// Leases from several processes together never exceed the limit: each is a
// pending transfer that TigerBeetle admits only within the limit.
//
// Leases apply to Acquire without a Request.ID. A lease Decision's ID is
// the lease transfer's, and its Timestamp is this Client's clock.
func WithLeases(cfg Leases) Option {
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = 100 * time.Millisecond
	}
	return func(c *Client) { c.leases = &leaser{cfg: cfg, keys: map[ID]*lease{}} }
}

type leaser struct {
	cfg  Leases
	mu   sync.Mutex
	keys map[ID]*lease
}

// lease is one user's lease in this Client.
type lease struct {
	mu      sync.Mutex
	res     Resource
	account ID
	t       tb.Transfer // the lease's pending transfer (amount: what it got)
	ts      uint64      // its cluster timestamp
	taken   uint64      // this Client's clock when it was taken, ns
	granted uint64
	used    uint64
	limit   uint64
	avail   uint64        // available in the account just after the lease
	demand  uint64        // units asked since the lease was taken
	refresh chan struct{} // closed when a refresh in progress ends
	ended   bool          // over: no more units are handed out from it
}

func (c *Client) acquireLeased(ctx context.Context, r Resource, req Request) (Decision, error) {
	uid := UserID(r.Ledger, req.User)
	lr := c.leases
	lr.mu.Lock()
	l := lr.keys[uid]
	if l == nil {
		l = &lease{res: r, account: uid}
		lr.keys[uid] = l
	}
	lr.mu.Unlock()

	counted := false
	for {
		l.mu.Lock()
		now := uint64(c.now().UnixNano())
		if !counted {
			l.demand += req.Amount
			counted = true
		}
		if !l.ended && l.granted > 0 && now < l.taken+uint64(lr.cfg.Lifetime) && l.granted-l.used >= req.Amount {
			l.used += req.Amount
			d := Decision{Allowed: true, Limit: l.limit, Remaining: l.avail + l.granted - l.used,
				ResetAfter: r.Window, ID: fromTB(l.t.ID), Timestamp: now}
			l.mu.Unlock()
			return d, nil
		}
		if d, ok := c.drain.deny(uid, req.Amount, now); ok {
			l.mu.Unlock()
			return d, nil
		}
		if ch := l.refresh; ch != nil {
			l.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return c.unavailableDecision(ctx)
			}
		}
		l.refresh = make(chan struct{})
		l.mu.Unlock()
		d, served, err := c.renew(ctx, lr, l, req)
		l.mu.Lock()
		close(l.refresh)
		l.refresh = nil
		l.mu.Unlock()
		if err != nil || served {
			return d, err
		}
	}
}

func (c *Client) unavailableDecision(ctx context.Context) (Decision, error) {
	d := Decision{Allowed: c.unavailable == FailOpen, Reason: Unavailable}
	if c.unavailable == ReturnError {
		return d, unavailable(context.Cause(ctx))
	}
	return d, nil
}

// renew ends l's current lease (giving unused units back) and takes a new
// one sized from recent demand, serving req from it if it fits.
func (c *Client) renew(ctx context.Context, lr *leaser, l *lease, req Request) (Decision, bool, error) {
	l.mu.Lock()
	now := uint64(c.now().UnixNano())
	size := req.Amount
	if l.taken > 0 {
		elapsed := max(now-l.taken, uint64(time.Millisecond))
		rate := float64(l.demand) / float64(elapsed) // units per ns
		// Rounded down: a unit too few costs one more lease, a unit too
		// many costs a void and a new hold when the lease ends.
		size = max(size, uint64(rate*float64(lr.cfg.Lifetime)))
	}
	maxUnits := lr.cfg.MaxUnits
	if maxUnits == 0 {
		maxUnits = max(l.limit/10, 1)
	}
	size = max(min(size, maxUnits), req.Amount)
	chain := c.endLease(l, now)
	// A lease of more than the call asks takes what is available up to its
	// size; one of exactly that takes it all or fails, and needs no lookup.
	balancing := size > req.Amount
	next := hold(l.res, l.account, size, tb.TransferFlags{BalancingDebit: balancing})
	l.mu.Unlock()

	for provisioned := false; ; provisioned = true {
		res, err := c.createTransfers(ctx, append(chain, next))
		if err != nil {
			d, err := c.unavailableDecision(ctx)
			if err == nil {
				return d, true, nil
			}
			return d, true, fmt.Errorf("ledger: lease: %w", err)
		}
		chain = nil // the old lease was ended (or had nothing to end)
		s := res[len(res)-1]
		taken := next
		switch s.Status {
		case tb.TransferCreated:
		case tb.TransferExceedsCredits:
			if balancing {
				return Decision{}, true, transferStatusError(len(res)-1, s.Status)
			}
			taken.Amount = tb.ToUint128(0)
		case tb.TransferDebitAccountNotFound:
			if l.res.Lazy && !provisioned {
				if err := c.provision(ctx, l.res, []UserLimit{{Key: req.User, Limit: l.res.DefaultLimit}}, false); err != nil {
					return Decision{}, true, err
				}
				next.ID = NewID().tb()
				continue
			}
			return Decision{}, true, c.missing(ctx, l.res, req.User)
		case tb.TransferCreditAccountNotFound:
			return Decision{}, true, fmt.Errorf("%w: no resource on ledger %d", ErrUnknownResource, l.res.Ledger)
		default:
			return Decision{}, true, transferStatusError(len(res)-1, s.Status)
		}

		if balancing {
			var got []tb.Transfer
			got, err = lookup(ctx, c, []tb.Uint128{next.ID}, c.tb.LookupTransfers)
			if err == nil && len(got) != 1 {
				err = fmt.Errorf("ledger: lease %s not found after it was created", fromTB(next.ID))
			}
			if err == nil {
				taken = got[0]
			}
		}
		var acct []tb.Account
		if err == nil {
			acct, err = c.lookupAccounts(ctx, l.account)
		}
		if err == nil && len(acct) != 1 {
			err = fmt.Errorf("%w: %s", ErrUnknownUser, l.account)
		}
		if err != nil {
			return Decision{}, true, err
		}
		b, err := balanceOf(acct[0])
		if err != nil {
			return Decision{}, true, err
		}
		granted, _ := u64(taken.Amount)
		l.mu.Lock()
		local := uint64(c.now().UnixNano())
		l.t, l.ts, l.taken, l.granted, l.used = taken, s.Timestamp, local, granted, 0
		l.limit, l.avail, l.demand, l.ended = b.Limit, b.Available, 0, false
		l.mu.Unlock()
		c.scheduleEnd(lr, l, taken.ID)
		if granted >= req.Amount {
			return Decision{}, false, nil // served from the new lease by the caller's loop
		}
		d := Decision{Reason: LimitExceeded, Limit: b.Limit, Remaining: b.Available + granted, ID: fromTB(next.ID), Timestamp: s.Timestamp, RetryAfter: -1}
		if req.Amount <= b.Limit {
			want := req.Amount - min(req.Amount, b.Available+granted)
			flights, err := c.inFlight(ctx, l.account, l.res.Window, s.Timestamp, max(want, 1), false)
			if err != nil {
				return d, true, err
			}
			d.RetryAfter = max(releaseAfter(flights, s.Timestamp, want), 0)
			if b.Available == 0 {
				last, err := c.lastExpiry(ctx, l.account, l.res.Window, s.Timestamp)
				if err != nil {
					return d, true, err
				}
				d.ResetAfter = time.Duration(last - min(last, s.Timestamp))
				c.drain.learn(l.account, b.Limit, flights, last, s.Timestamp, local, c.denyCacheBound())
			}
		}
		return d, true, nil
	}
}

// endLease returns the chain that gives l's unused units back: void the
// lease and take its used units again until the lease would have expired
// (rounded up to whole seconds, and one more on a remote cluster, whose
// clock this Client estimates from below). l.mu is held.
func (c *Client) endLease(l *lease, now uint64) []tb.Transfer {
	if l.granted == 0 || l.ended || l.used == l.granted {
		l.ended = true
		return nil
	}
	l.ended = true
	// Cluster time now is at least the lease's timestamp plus the time
	// this Client's clock moved since it learnt of the lease.
	clusterNow := l.ts + (now - min(now, l.taken))
	expires := l.ts + uint64(l.t.Timeout)*uint64(time.Second)
	if clusterNow >= expires {
		return nil // it has expired: everything is back already
	}
	secs := (expires - clusterNow + uint64(time.Second) - 1) / uint64(time.Second)
	if !c.inProcess {
		secs++
	}
	t := l.t
	t.Timeout = uint32(min(secs, math.MaxUint32))
	return c.regrant(t, l.used)
}

// scheduleEnd gives a lease's unused units back when its lifetime ends, if
// no newer lease replaced it by then.
func (c *Client) scheduleEnd(lr *leaser, l *lease, id tb.Uint128) {
	time.AfterFunc(lr.cfg.Lifetime, func() {
		l.mu.Lock()
		if l.t.ID != id || l.refresh != nil || uint64(c.now().UnixNano()) < l.taken+uint64(lr.cfg.Lifetime) {
			l.mu.Unlock()
			return // replaced, being replaced, or (with a manual clock) not over yet
		}
		chain := c.endLease(l, uint64(c.now().UnixNano()))
		l.mu.Unlock()
		if len(chain) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			defer cancel()
			_, _ = c.createTransfers(ctx, chain) // on failure the units expire with the lease: conservative
		}
	})
}
