// Package view is what a ledger.Client knows of a user's limit account without reading it, and its arithmetic.
package view

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// View is what a Client knows of one user's limit account without reading
// it per decision: the limit, the holds in flight it took itself (with the
// instants they return), and what its last read of the account showed
// beyond those. Decisions describe themselves from it (Remaining,
// RetryAfter, ResetAfter), coalescing sizes merged transfers with it, and a
// user it knows to be drained is denied without any I/O.
//
// We considered reading the account after every decision, as the first
// version did: exact, but on a cluster a second request per decision, and
// the client keeps one request in flight, so every decision waited for two
// turns. A view costs no request: the Client knows what it took and when
// each unit returns, and only what other processes did is missing. That is
// learnt from the cluster's own answers (a denial the view did not predict)
// and from reads made in the background, batched and rate-limited.
//
// Times are cluster times in nanoseconds. Every method requires that the
// user's mutex is held.
//
// Its arithmetic (the limit, the holds, the unknown units) is read and
// written through its methods only. Its exported fields are the Client's
// bookkeeping of the user, which the view keeps beside its own hot fields
// (see HotBytes) and never reads.
type View struct {
	// First the fields every decision reads or writes: with the user's
	// mutex, published denial and ID they fill its first two cache lines,
	// which for a user not called lately are misses (see ledger's user).
	limit      uint64
	held       uint64  // units of holds
	next       uint64  // no hold returns before it (so prune need not read holds, which are cold, before then)
	top        uint64  // the last hold's return instant, 0 without holds (so took and resetAfter need not read them)
	holds      []vhold // holds in flight this Client knows of, ordered by return
	checked    int64   // local time (ns) the cluster last confirmed a denial the view predicted
	unknown    uint64  // units in flight the last read showed beyond the holds known
	mergedTo   uint64  // no merged hold counts a transfer returning after it (0: none merged)
	ReadLocal  int64   // local time (ns) of the last read; 0: never read
	Uses       uint16  // decisions since the last read, up to its largest value
	limitKnown bool    // read, or set by this Client (provisioning, SetLimit); else assumed the default
	stale      bool    // the cluster contradicted the view: do not deny on its word until a read
	Queued     bool    // waits in the Client's read queue
	ScanQueued bool    // waits in the Client's scan queue
	// Provisioned: the account exists and its limit was credited, as this
	// Client saw (a credit, an admission, a read); until then a decision
	// on a lazy resource provisions it first.
	Provisioned bool

	window     uint64 // the resource's window, ns: every unit returns within it (a second more for re-holds)
	lag        uint64 // how late the cluster may free a returned hold, ns (ReturnLag on a cluster, 0 in process)
	unknownEnd uint64 // the instant by which the unknown units have returned at the latest
	lastReturn uint64 // when the last hold dropped as returned was due
	slack      uint64 // how much earlier than their instants merged holds may say units return (see compact)
	ScanLocal  int64  // local time (ns) of the last scan of its transfers
}

// HotBytes bounds the offset within a View of the end of the fields every
// decision reads or writes (the first, up to Queued): a ledger user keeps
// them in its first two cache lines, which its layout test checks.
const HotBytes = 96

// ID is a transfer's ID (a ledger.ID).
type ID = [16]byte

// Hold is a hold in flight that a scan found: a pending transfer's ID, its
// units and when they return.
type Hold struct {
	ID      ID
	Amount  uint64
	Expires uint64
}

// vhold is a hold in flight: units taken by a pending transfer, or by
// several neighbouring ones that compact merged.
type vhold struct {
	id      ID     // the transfer's; a merged hold's first
	amount  uint64 // its units; a merged hold's, all of them
	expires uint64 // the instant its units return; a merged hold's earliest
	last    uint64 // a merged hold's latest instant; 0 for one transfer
}

// Recheck bounds how long a user is denied on the view's word without
// asking the cluster: a limit raised, or units given back, by another
// process are seen within it.
const Recheck = time.Second

// ReturnLag is how late after its instant a real cluster may free an
// expired hold (it frees them in batches, typically within 100 ms). A
// denial or a read that close after a hold's instant may still count it.
const ReturnLag = time.Second

// New is the view of a user of a resource whose window is window (ns),
// on a cluster that may free a returned hold lag late (ns): its limit is
// limit, known for sure or assumed (the resource's default, until a read).
func New(limit, window, lag uint64, known bool) View {
	return View{limit: limit, limitKnown: known, window: window, lag: lag}
}

// Limit is the user's limit as far as the view knows (see
// isLimitKnown).
func (v *View) Limit() uint64 { return v.limit }

// LimitKnown reports whether the limit was read, or set by this Client,
// rather than assumed.
func (v *View) LimitKnown() bool { return v.limitKnown }

// AssumeLimit takes limit for the user's limit unless the view knows it:
// a credit of limit was seen, which a later SetLimit may have changed.
func (v *View) AssumeLimit(limit uint64) {
	if !v.limitKnown {
		v.limit = limit
	}
}

// DeniedUntil says how long a denial the view decided now holds as it
// is: while the cluster's clock is before until (no hold, known or
// unknown, returns before it) and this Client's before untilLocal (the
// view denies on its word until then).
func (v *View) DeniedUntil() (until uint64, untilLocal int64) {
	until = v.next
	if v.unknown > 0 {
		until = min(until, v.unknownEnd)
	}
	return until, v.checked + int64(Recheck)
}

// prune drops the holds that have returned at t.
func (v *View) prune(t uint64) {
	if t >= v.next {
		n := 0
		for n < len(v.holds) && v.holds[n].expires <= t {
			v.held -= v.holds[n].amount
			v.lastReturn = v.holds[n].expires
			n++
		}
		v.holds = v.holds[n:]
		v.next = math.MaxUint64
		if len(v.holds) > 0 {
			v.next = v.holds[0].expires
		} else {
			v.top = 0
		}
	}
	if v.unknown > 0 && t >= v.unknownEnd {
		v.unknown = 0
	}
}

// InFlight is how many units are in flight at t, as far as the view knows.
func (v *View) InFlight(t uint64) uint64 {
	v.prune(t)
	return v.held + v.unknown
}

// Available is how many units can be taken at t, as far as the view knows.
func (v *View) Available(t uint64) uint64 {
	return v.limit - min(v.limit, v.InFlight(t))
}

// KnowLimit records that the user's limit is limit, for sure. fresh is
// this Client's clock when nothing can be in flight that it does not know
// of (the account was just made): the view counts as read then. 0 means
// units may be in flight that this Client did not take: the view is stale
// until a read.
func (v *View) KnowLimit(limit uint64, fresh int64) {
	v.limit, v.limitKnown = limit, true
	if fresh != 0 {
		v.ReadLocal = fresh // as good as a read
	} else {
		v.stale = true
	}
}

// Complete reports whether the view knows every unit in flight and the
// limit (as of its last contact with the cluster).
func (v *View) Complete() bool { return v.limitKnown && v.unknown == 0 && !v.stale }

// Took records a hold of amount units taken at t, returning at expires.
// A hold it knows already (a retry of an applied attempt echoes the
// original timestamp, hence the same instant) is not counted twice.
func (v *View) Took(id ID, amount, expires uint64) {
	i := len(v.holds)
	if expires <= v.top { // else the usual case: after every hold, none the same
		for i > 0 && v.holds[i-1].expires > expires {
			i-- // rare: a shorter re-hold; holds of one window arrive in order
		}
		for j := i - 1; j >= 0 && v.holds[j].expires == expires; j-- {
			if v.holds[j].id == id {
				return
			}
		}
	}
	if i == len(v.holds) {
		v.top = expires
	}
	if v.merges(expires) {
		// It may be a hold a merged one counts already, or not: counted
		// again, the view only thinks fewer units available than there
		// are, and stale, it denies nothing on its own word until a read.
		v.stale = true
	}
	if h := (vhold{id: id, amount: amount, expires: expires}); i == len(v.holds) {
		v.holds = append(v.holds, h)
	} else {
		v.holds = slices.Insert(v.holds, i, h)
	}
	v.held += amount
	v.next = min(v.next, expires)
	if len(v.holds) > maxHolds {
		v.compact()
	}
}

// setTop sets top from the holds, after a change other than at either end.
func (v *View) setTop() {
	v.top = 0
	if n := len(v.holds); n > 0 {
		v.top = v.holds[n-1].expires
	}
}

// maxHolds bounds the holds a view keeps, and so its memory: a user with
// more in flight (a large limit used fast) has neighbouring holds merged.
const maxHolds = 1024

// compact halves the holds by merging each with the next. A merged hold
// returns at the earliest instant of its transfers: the view may then think
// units back up to slack before they are (it never denies on its own word
// what the cluster would admit), and takes a denial that soon after a
// return as the cluster's lag, not as another process's doing. Neighbouring
// holds of a user that busy are close together: the slack is small.
//
// A merged hold keeps only its first transfer's ID, so that memory stays
// bounded: the end of one of its transfers, or a retry's echo of one, can
// no longer be matched to its units. The view then goes stale (see ended
// and took) and a read or a scan puts it right.
func (v *View) compact() {
	n := 0
	for i := 0; i < len(v.holds); i += 2 {
		h := v.holds[i]
		if i+1 < len(v.holds) {
			next := v.holds[i+1]
			h.amount += next.amount
			h.last = max(h.expires, h.last, next.expires, next.last)
			v.slack = max(v.slack, h.last-h.expires)
			v.mergedTo = max(v.mergedTo, h.last)
		}
		v.holds[n] = h
		n++
	}
	v.holds = v.holds[:n]
	v.setTop()
}

// merges reports whether a merged hold may count a transfer that returns
// at expires.
func (v *View) merges(expires uint64) bool {
	if expires > v.mergedTo {
		return false // the usual case: a new hold, after every merged one
	}
	for _, h := range v.holds {
		if h.expires > expires {
			break
		}
		if h.last >= expires {
			return true
		}
	}
	return false
}

// Ended records that hold id was voided (kept 0: its units are back) or
// posted (kept of its units are spent for good, and the limit shrinks by
// them; the rest are back). A hold the
// view does not know by its ID (another process's, counted as unknown
// units, or one that compact merged) leaves it stale: it counts units that
// are no longer in flight until a read.
func (v *View) Ended(id ID, kept uint64) {
	for i, h := range v.holds {
		if h.id == id && h.last == 0 {
			v.holds = slices.Delete(v.holds, i, i+1)
			v.setTop()
			v.held -= h.amount
			v.limit -= min(v.limit, h.amount, kept)
			return
		}
	}
	v.stale = true
}

// Admitted records that the cluster admitted amount units at t (before
// recording the hold): a view that said they did not fit is stale.
func (v *View) Admitted(amount, t uint64) {
	if v.Complete() && v.Available(t) < amount {
		v.stale = true // units came back, or the limit was raised, elsewhere
	}
}

// Charged returns how many of amount units a balancing hold at t took:
// what remained, as far as the view knows. A view that does not know every
// unit goes stale: it may count the hold as more than it took, and it does
// not deny on its word until a read.
func (v *View) Charged(amount, t uint64) uint64 {
	if !v.Complete() {
		v.stale = true
		return amount
	}
	return min(amount, v.Available(t))
}

// Denied records that the cluster denied amount units at t (local time
// now). A denial the view predicted confirms it: the user may be denied
// locally for a while. One it did not predict means another process holds
// units the view does not know of; unless a hold of this Client returned
// so recently that the cluster may not have freed it yet, the view is
// stale until read, and counts the difference as unknown units.
func (v *View) Denied(amount, t uint64, now int64) {
	avail := v.Available(t)
	switch {
	case avail < amount:
		v.checked = now
	case t < v.lastReturn+max(v.lag, v.slack):
		// The cluster has not freed a returned hold yet: ask it again.
	default:
		v.stale = true
		v.unknown += avail - min(avail, amount-1)
		v.unknownEnd = max(v.unknownEnd, t+v.window+uint64(time.Second))
	}
}

// Read records what a read of the account showed: the limit and the units
// in flight (pending), just after the cluster applied every hold this
// Client knows of and none it took later. t is the cluster time of the
// last of those (a lower bound of the read's instant) and span how much
// later the read may have been made: holds returning within [t, t+span],
// or shortly before t on a cluster that frees them late, may or may not be
// in pending.
func (v *View) Read(limit, pending, t, span uint64) {
	v.limit, v.limitKnown = limit, true
	v.prune(t - min(t, max(v.lag, v.slack)))
	var surely, maybe uint64 // units of known holds surely, and perhaps, still in flight
	for _, h := range v.holds {
		maybe += h.amount
		if h.expires > t+span {
			surely += h.amount
		}
	}
	v.stale = pending < surely // holds of this Client ended elsewhere
	v.unknown = pending - min(pending, maybe)
	v.unknownEnd = t + v.window + uint64(time.Second)
	v.Uses = 0
}

// Scanned records the holds in flight at t that a scan of the account's
// transfers found (flights, with when each returns): the view then knows
// every unit in flight, its own holds included.
func (v *View) Scanned(fs []Hold, t uint64) {
	v.holds, v.held, v.next, v.mergedTo = v.holds[:0], 0, 0, 0
	for _, f := range fs {
		v.holds = append(v.holds, vhold{id: f.ID, amount: f.Amount, expires: f.Expires})
		v.held += f.Amount
	}
	slices.SortFunc(v.holds, func(a, b vhold) int { return cmp.Compare(a.expires, b.expires) })
	v.setTop()
	v.unknown, v.stale = 0, false
	v.prune(t)
}

// Deny reports whether amount units can be denied at t (local time now)
// without asking the cluster: the view is complete, says they do not fit,
// and the cluster confirmed a denial it predicted within Recheck.
func (v *View) Deny(amount, t uint64, now int64) bool {
	return v.checked != 0 && now-v.checked < int64(Recheck) && v.Complete() && v.Available(t) < amount
}

// Report is what a Decision says of a user: its limit, what remains, when
// the units asked return (for a denial) and when all of them have, as
// instants, so that a report can be kept and read later (a published
// denial keeps one). It is the one place where a Decision's Limit,
// Remaining, RetryAfter and ResetAfter are worked out: the view makes one
// (Report; DenialReport for a denial; SpareReport for units taken beyond a
// call's, a lease's or a merged transfer's; LeaseReport for a call a lease
// served), and package ledger makes every Decision from one, on every
// path: sent, denied locally, leased, coalesced, paid, unanswered (an
// empty report) and checked.
type Report struct {
	Limit, Remaining uint64
	// Stamp, when not 0, is the cluster time of an admission an earlier
	// attempt made: the Decision's Timestamp, while its durations count
	// from the instant it is made at.
	Stamp            uint64
	retryAt, resetAt uint64 // see View.RetryAt and View.lastReturnAt (t when nothing is in flight)
	window           uint64 // the view's, for a denial: what untellable means
}

// ResetAfter is how long after cluster time t every unit r knows in
// flight has returned.
func (r Report) ResetAfter(t uint64) time.Duration {
	return time.Duration(r.resetAt - min(r.resetAt, t))
}

// RetryAfter is, for a denial, how long after cluster time t the units
// asked will have returned, from the holds known and, for the unknown
// units, the latest instant they return (exact when the view is
// complete); negative when they exceed the limit, and the longest a unit
// can stay in flight when the view cannot tell.
func (r Report) RetryAfter(t uint64) time.Duration { return retryAfter(r.retryAt, t, r.window) }

// Report is what v says at t: every decision makes one, from the view's
// hot fields only (see View).
func (v *View) Report(t uint64) Report {
	in := v.InFlight(t)
	r := Report{Limit: v.limit, Remaining: v.limit - min(v.limit, in), resetAt: t}
	if in > 0 {
		r.resetAt = v.lastReturnAt(t)
	}
	return r
}

// DenialReport is v's report at t of a denial of amount units: it also
// says when they will have returned, which reads the holds.
func (v *View) DenialReport(amount, t uint64) Report {
	r := v.Report(t)
	r.retryAt, r.window = v.RetryAt(amount, t), v.window
	return r
}

// SpareReport is v's report at t of an admission whose units were taken
// with spare more that no call has yet, though they are in flight: a
// lease's beyond the call that renewed it, which the lease hands out later,
// or a merged transfer's for the calls merged after this one (each call is
// reported as if they had come one by one). They count as remaining.
func (v *View) SpareReport(t, spare uint64) Report {
	r := v.Report(t)
	r.Remaining += spare
	return r
}

// LeaseReport is v's report at t of a call a lease served, with unused of
// the lease's units left after it: they count as remaining. It says that
// every unit is back one window after t, by when every hold taken up to t
// has returned (but for a re-hold's extra second): the lease's, which
// this Client took, among them. That needs no look at the holds.
func (v *View) LeaseReport(t, unused uint64) Report {
	return Report{Limit: v.limit, Remaining: v.Available(t) + unused, resetAt: t + v.window}
}

// Instants that are not: see retryAt.
const (
	never      = math.MaxUint64     // more than the limit
	untellable = math.MaxUint64 - 1 // no return the view knows of brings enough
)

// RetryAt is the instant from which amount units will have returned (see
// retryAfter): t if they are available now, or never or untellable.
func (v *View) RetryAt(amount, t uint64) uint64 {
	if amount > v.limit {
		return never
	}
	avail := v.Available(t)
	if avail >= amount {
		return t
	}
	need := amount - avail
	var got uint64
	unknownAdded := v.unknown == 0
	for _, h := range v.holds {
		if !unknownAdded && v.unknownEnd <= h.expires {
			if got += v.unknown; got >= need {
				return v.unknownEnd
			}
			unknownAdded = true
		}
		if got += h.amount; got >= need {
			return h.expires
		}
	}
	if !unknownAdded {
		if got += v.unknown; got >= need {
			return v.unknownEnd
		}
	}
	return untellable
}

// retryAfter is how long after t retry instant at is, for a user of a
// resource whose window is window (see View.RetryAt).
func retryAfter(at, t, window uint64) time.Duration {
	switch at {
	case never:
		return -1
	case untellable:
		return time.Duration(window) + time.Second
	}
	return time.Duration(at - min(at, t))
}

// lastReturnAt is when the last unit the view knows in flight at t
// returns (with some in flight).
func (v *View) lastReturnAt(t uint64) uint64 {
	end := t
	if len(v.holds) > 0 {
		end = v.top
	}
	if v.unknown > 0 {
		end = max(end, v.unknownEnd)
	}
	return end
}
