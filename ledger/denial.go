package ledger

import "github.com/tblimit/tblimit/ledger/internal/view"

// denyPublished denies amount units of u from its published denial
// without taking u.mu, if that denial holds now. A call to a lease
// (leased) takes only a denial that says the lease cannot serve, and
// counts its demand in it (see denial.asked); a call with a plan (its
// Request.Limit; 0: none) only a denial under the plan's limit.
func (c *Client) denyPublished(u *user, amount uint64, leased bool, plan uint64) (Decision, bool) {
	dn := u.denial.Load()
	if dn == nil || leased && dn.asked == nil || !dn.under(plan) {
		return Decision{}, false
	}
	now, t := c.nows()
	d, ok := dn.decision(amount, t, now)
	if !ok {
		return Decision{}, false
	}
	if leased {
		dn.asked.add(amount)
	}
	c.localDenials.add(1)
	return d, true
}

// denyLocally returns the decisions for holds (of users us) when one of
// them can be denied on its user's view, without sending anything: the
// denying hold says LimitExceeded, the others what their views say. The
// decisions are appended to ds. Otherwise it reports whether every user
// was seen provisioned under the lock it took anyway, so that the
// decision need not take it again to tell (see sight).
//
// A decision sent takes each user's lock once more, to settle: the answer
// comes a round trip later, and holding the lock across it would queue the
// user's other calls (and coalescing's merge, which reads the view) behind
// the cluster.
func (c *Client) denyLocally(parts []Part, us []*user, ds []Decision) (_ []Decision, denied, provisioned bool) {
	if len(parts) == 1 {
		if d, ok := c.denyPublished(us[0], parts[0].Request.Amount, false, parts[0].Request.Limit); ok {
			return append(ds, d), true, false
		}
	}
	provisioned = true
	now, t := c.nows()
	deny := -1
	var denial Decision // described under the lock that decided it
	for i := range parts {
		amount := parts[i].Request.Amount
		us[i].mu.Lock() // not lock: a denial changes nothing
		provisioned = provisioned && us[i].v.Provisioned
		ok := us[i].v.Deny(amount, t, now)
		if ok {
			denial = localDenial(&us[i].v, amount, t)
			if len(parts) == 1 {
				us[i].publishDenial(amount, t, now, false)
			}
		}
		us[i].mu.Unlock()
		if ok {
			deny = i
			break
		}
	}
	if deny < 0 {
		return nil, false, provisioned
	}
	for i := range parts {
		if i == deny {
			ds = append(ds, denial)
			continue
		}
		us[i].mu.Lock()
		d := verdict(&us[i].v, parts[i].Request.Amount, t, false)
		us[i].mu.Unlock()
		ds = append(ds, d)
	}
	c.localDenials.add(1)
	return ds, true, false
}

// withdraw withdraws u's published denial, if any, and counts the units
// asked under it in the demand of u's lease. u.mu is held.
func (u *user) withdraw() {
	dn := u.denial.Load()
	if dn == nil {
		return
	}
	u.denial.Store(nil)
	if dn.asked != nil && u.lease != nil {
		// A call that read dn just before it was withdrawn may add its
		// units after this: the lease's counter keeps them for the next
		// withdrawal.
		u.lease.demand += dn.asked.take()
	}
}

// denial is a local denial of amount units, and what it says, that holds
// while the cluster's clock is before until and this Client's before
// untilLocal, and nothing else happens to the user (see user.denial).
type denial struct {
	amount     uint64
	report     view.Report
	until      uint64 // no hold returns before it
	untilLocal int64  // the view denies on its word until then
	// asked, for a denial decided for a call to a lease (WithLeases),
	// counts the units the calls it denies asked: the lease's demand,
	// counted without u.mu, in the lease's own counter (lease.asked), which
	// every such denial of the user shares. Such a denial also says that
	// the lease could not serve amount units, which nothing but a change
	// under u.mu undoes (its units and lifetime only run out). It is nil
	// otherwise.
	asked *counter
}

// publishDenial publishes the denial of amount units v just decided at t
// (local time now); leased says it was decided for a call to a lease that
// could not serve it. u.mu is held.
func (u *user) publishDenial(amount, t uint64, now int64, leased bool) {
	u.withdraw()
	until, untilLocal := u.v.DeniedUntil()
	if until <= t {
		return
	}
	dn := &denial{amount: amount, report: u.v.DenialReport(amount, t), until: until, untilLocal: untilLocal}
	if leased {
		if u.lease.asked == nil {
			u.lease.asked = new(counter) // once per user: denials come and go
		}
		dn.asked = u.lease.asked
	}
	u.denial.Store(dn)
}

// under says whether d was decided under the limit of plan (a
// Request.Limit; 0, no plan, takes any).
func (d *denial) under(plan uint64) bool { return plan == 0 || d.report.Limit == plan }

// decision is d's Decision at cluster time t (local time now), if it
// holds for amount units then.
func (d *denial) decision(amount, t uint64, now int64) (Decision, bool) {
	if amount != d.amount || t >= d.until || now >= d.untilLocal {
		return Decision{}, false
	}
	return decisionOf(d.report, false, LimitExceeded, ID{}, t), true
}

// localDenial is the Decision for amount units of u denied on its view's
// word at cluster time t. u.mu is held.
func localDenial(v *view.View, amount, t uint64) Decision {
	return decisionOf(v.DenialReport(amount, t), false, LimitExceeded, ID{}, t)
}
