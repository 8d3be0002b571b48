package ledger

import (
	"context"
	"math"
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
// recent demand (its rate times τ, capped at MaxUnits and at what the
// Client's view of the user says is available), so a user that calls
// rarely gets leases of exactly what it asks, which are ordinary decisions:
// leases only pay off for hot users. When a lease ends with units unused,
// they are given back at once.
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
// the lease transfer's, and its Timestamp is this Client's estimate of the
// cluster's clock.
func WithLeases(cfg Leases) Option {
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = 100 * time.Millisecond
	}
	return func(c *Client) { c.leases = &leaser{cfg: cfg} }
}

type leaser struct{ cfg Leases }

// lease is one user's current lease in this Client. It is guarded by its
// user's mutex.
type lease struct {
	hold    tb.Transfer   // the lease's pending transfer, as created
	heldAt  uint64        // its cluster timestamp
	taken   int64         // this Client's clock when it was asked for, ns: before the cluster took it
	learnt  int64         // this Client's clock when it learnt of it, ns: after the cluster took it
	granted uint64        // units it holds
	used    uint64        // units handed out
	demand  uint64        // units asked since it was taken (see denial.asked)
	asked   *counter      // units asked of its user's leased denials, not yet in demand
	refresh chan struct{} // closed when a renewal in progress ends
	ended   bool          // no more units are handed out from it
}

func (c *Client) acquireLeased(ctx context.Context, r Resource, req Request) (Decision, error) {
	u := c.users.get(r, req.User)
	// A drained user whose lease cannot serve is denied without its lock,
	// which every caller of a hot user would queue for.
	if d, ok := c.denyPublished(u, req.Amount, true, req.Limit); ok {
		return d, nil
	}
	h := Part{Resource: r, Request: req}
	counted, planned := false, req.Limit == 0
	for {
		u.lock()
		if !planned && (u.planning() != nil || !u.hasLimit(req.Limit)) {
			u.mu.Unlock()
			if err := c.plan(ctx, u, &h); err != nil {
				return Decision{}, err
			}
			planned = true
			continue
		}
		planned = true // checked under the lock the lease is served under
		if u.lease == nil {
			u.lease = &lease{}
		}
		l := u.lease
		if !counted {
			l.demand += req.Amount
			counted = true
		}
		now, t := c.nows()
		if d, ok := c.fromLease(u, req.Amount, now, t); ok {
			u.mu.Unlock()
			return d, nil
		}
		if ch := l.refresh; ch != nil {
			u.mu.Unlock()
			select {
			case <-ch:
				continue // renewed by another call: try the new lease
			case <-ctx.Done():
				// Nothing was sent for this call: no attempt to name.
				d := c.unanswered(ID{}, false)
				if c.unavailable == ReturnError {
					return d, unavailable(context.Cause(ctx))
				}
				return d, nil
			}
		}
		l.refresh = make(chan struct{})
		chain, size := c.renewal(u, l, req, now, t)
		u.mu.Unlock()
		return c.renew(ctx, u, l, chain, size, h)
	}
}

// fromLease decides amount units of u without any I/O, if it can: from
// its lease, or denied on its view's word, a denial it publishes for the
// calls after it (see denial.asked). u.mu is held.
func (c *Client) fromLease(u *user, amount uint64, now int64, t uint64) (Decision, bool) {
	l := u.lease
	if !l.ended && l.granted > 0 && now < l.taken+int64(c.leases.cfg.Lifetime) && l.granted-l.used >= amount {
		l.used += amount
		c.leaseAdmissions.Add(1)
		return decisionOf(u.v.LeaseReport(t, l.granted-l.used), true, Admitted, fromTB(l.hold.ID), t), true
	}
	if u.v.Deny(amount, t, now) {
		c.localDenials.add(1)
		u.publishDenial(amount, t, now, true)
		return localDenial(&u.v, amount, t), true
	}
	return Decision{}, false
}

// renew sends renewal chain (a lease of size units, with the call h) and, when
// a lease larger than the call was refused (the view thought it fitted),
// then a lease of exactly the call's amount. It records the lease taken and
// lets the calls waiting for the renewal go on.
func (c *Client) renew(ctx context.Context, u *user, l *lease, chain []step, size uint64, h Part) (Decision, error) {
	// A lease admits for its lifetime from when it was asked for: the
	// cluster took it later, so every unit it admits returns at least a
	// window less the lifetime after it was admitted, however long the
	// answer took.
	asked := c.localNow()
	spec := opSpec{exact: c.exact, keep: true, spare: size - h.Request.Amount}
	a, err := c.decide(ctx, &spec, chain, []Part{h}, nil)
	d := soleDecision(a.ds)
	answered := func() bool { return err == nil && d.Reason != Unavailable }
	if answered() && !d.Allowed && size > h.Request.Amount {
		size = h.Request.Amount
		spec.spare = 0
		exactly := []step{{T: newHold(u.res, u.id, size, tb.TransferFlags{}), User: u, Decide: true}}
		a, err = c.decide(ctx, &spec, exactly, []Part{h}, nil)
		d = soleDecision(a.ds)
	}
	u.lock()
	defer u.mu.Unlock()
	close(l.refresh)
	l.refresh = nil
	if !answered() || !d.Allowed {
		// Unanswered, a renewal admitted by the policy (FailOpen) is no
		// lease: nothing says the cluster holds its units.
		return d, err
	}
	l.hold, l.heldAt, l.taken, l.learnt = a.chain[len(a.chain)-1], d.Timestamp, asked, c.localNow()
	l.granted, l.used, l.demand, l.ended = size, h.Request.Amount, 0, false
	// The user is not drained: the counter of its leased denials, whose
	// count its demand took when lock withdrew the last one, goes, so that
	// only users denied lately keep one.
	l.asked = nil
	if size > h.Request.Amount {
		c.scheduleEnd(u, l.hold.ID) // a lease of exactly the call's units has nothing to give back
	}
	return d, nil
}

// renewal returns the chain that ends l (giving its unused units back) and
// takes a new lease, sized from recent demand, for req; and that size. A
// lease of exactly what the call asks takes it all or is denied, as any
// decision; a larger one is taken only as far as u's view, complete, says
// units are available, so that it needs no lookup to learn what it got.
// u.mu is held.
func (c *Client) renewal(u *user, l *lease, req Request, now int64, t uint64) ([]step, uint64) {
	cfg := c.leases.cfg
	size := req.Amount
	if l.taken > 0 {
		elapsed := max(now-l.taken, int64(time.Millisecond))
		rate := float64(l.demand) / float64(elapsed) // units per ns
		// Rounded down: a unit too few costs one more lease, a unit too
		// many costs a void and a new hold when the lease ends.
		size = max(size, uint64(rate*float64(cfg.Lifetime)))
	}
	maxUnits := cfg.MaxUnits
	if maxUnits == 0 {
		maxUnits = max(u.v.Limit()/10, 1)
	}
	size = min(size, maxUnits)
	var chain []step
	var back uint64 // what this chain gives back: the view counts it in flight
	if end := c.endLease(l, now); len(end) > 0 {
		back = l.granted - l.used
		for _, x := range end {
			chain = append(chain, step{T: x, User: u})
		}
	}
	if size > req.Amount {
		if u.v.Complete() {
			size = min(size, u.v.Available(t)+back)
		} else {
			size = req.Amount
		}
	}
	size = max(size, req.Amount)
	chain = append(chain, step{T: newHold(u.res, u.id, size, tb.TransferFlags{}), User: u, Decide: true})
	return chain, size
}

// endLease returns the chain that gives l's unused units back: void the
// lease and take its used units again until the lease would have expired
// (rounded up to whole seconds, and one more on a remote cluster, whose
// clock this Client estimates from below). u.mu is held.
func (c *Client) endLease(l *lease, now int64) []tb.Transfer {
	if l.granted == 0 || l.ended || l.used == l.granted {
		l.ended = true
		return nil
	}
	l.ended = true
	// Cluster time now is at least the lease's timestamp plus the time
	// this Client's clock moved since it learnt of the lease (an
	// underestimate: the units are held again a little longer).
	clusterNow := l.heldAt + uint64(max(now-l.learnt, 0))
	expires := l.heldAt + uint64(l.hold.Timeout)*uint64(time.Second)
	if clusterNow >= expires {
		return nil // it has expired: everything is back already
	}
	secs := (expires - clusterNow + uint64(time.Second) - 1) / uint64(time.Second)
	if !c.conn.InProcess() {
		secs++
	}
	t := l.hold
	t.Timeout = uint32(min(secs, math.MaxUint32))
	return regrant(t, l.used, endID(roleCancel, fromTB(t.ID)), NewID(), t.Code)
}

// regrant returns the chain that voids pending transfer t (with ID void)
// and takes used of its units again (a hold with ID keep and code code)
// for t.Timeout seconds, linked: a lease giving back what it did not use, a
// Reservation's commit keeping what the work used.
func regrant(t tb.Transfer, used uint64, void, keep ID, code uint16) []tb.Transfer {
	end := tb.Transfer{
		ID:              void.tb(),
		PendingID:       t.ID,
		DebitAccountID:  t.DebitAccountID,
		CreditAccountID: t.CreditAccountID,
		Ledger:          t.Ledger,
		Code:            t.Code,
		Flags:           tb.TransferFlags{VoidPendingTransfer: true}.ToUint16(),
	}
	if used == 0 {
		return []tb.Transfer{end}
	}
	end.Flags = tb.TransferFlags{VoidPendingTransfer: true, Linked: true}.ToUint16()
	kept := t
	kept.ID = keep.tb()
	kept.Timestamp = 0
	kept.Amount = tb.ToUint128(used)
	kept.Code = code
	kept.Flags = tb.TransferFlags{Pending: true}.ToUint16()
	return []tb.Transfer{end, kept}
}

// scheduleEnd gives a lease's unused units back when its lifetime ends, if
// no newer lease replaced it by then.
func (c *Client) scheduleEnd(u *user, id tb.Uint128) {
	tau := c.leases.cfg.Lifetime
	time.AfterFunc(tau, func() {
		u.lock()
		l := u.lease
		now := c.localNow()
		if l == nil || l.hold.ID != id || l.refresh != nil || now < l.taken+int64(tau) {
			u.mu.Unlock()
			return // replaced, being replaced, or (with a manual clock) not over yet
		}
		var chain []step
		for _, x := range c.endLease(l, now) {
			chain = append(chain, step{T: x, User: u})
		}
		u.mu.Unlock()
		if len(chain) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), c.conn.Timeout())
			defer cancel()
			_, _ = c.send(ctx, &opSpec{}, chain) // on failure the units expire with the lease: conservative
		}
	})
}
