package ledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Audit is what a user's account on a resource recorded over a span of
// time, checked against the user's limit as it was at each instant: the
// sliding window check of what TigerBeetle holds, independent of any
// Client's view.
type Audit struct {
	// Limit is the user's limit now; LimitMin and LimitMax the least and
	// most it was between the first and the last transfer of the span
	// (SetLimit changes it, and a lazy user's first decision credits it).
	Limit, LimitMin, LimitMax uint64
	// Holds and Units count the holds taken in the span (pending transfers
	// out of the account: decisions, reservations, leases) and their units.
	// A lease's give-back (a void linked to a hold of the units it had
	// handed out) is counted as the lease it gives back, not as a hold.
	Holds int
	Units uint64
	// Ended counts the holds ended early by a post or void (a Reservation's
	// Commit or Cancel, a Reset, a lowered limit): their units are not
	// counted in MostInWindow, which checks the promise that units return
	// only by expiring. A lease given back counts the units it kept, from
	// when it was taken.
	Ended int
	// MostInWindow is the most units taken, by holds not ended early,
	// within any interval of one window, and WindowStart where the first
	// such interval starts. It is at most the largest limit of that
	// interval when the promise held.
	MostInWindow uint64
	WindowStart  time.Time
	// MostInFlight is the most units held at any instant (holds ended
	// early count until they ended), and InFlightOver whether that ever
	// exceeded the limit of the instant (TigerBeetle enforces it itself).
	MostInFlight uint64
	InFlightOver bool
	// Over lists the intervals of one window in which more units were
	// taken than the largest limit of the interval, by their start (at
	// most 100).
	Over []time.Time
}

// OK reports whether nothing was over the limit.
func (a Audit) OK() bool { return len(a.Over) == 0 && !a.InFlightOver }

// Audit reads every transfer of user key's account on r from from until
// to (cluster time; zero times: no bound) and checks that no interval of
// one window holds more units than the user's limit allowed then, and that
// no instant held more in flight. It reads what the cluster recorded, not
// this Client's view, so that it can check any process's decisions, a
// production ledger's included. A user deciding while it is read is read
// as of one moment; one whose limit changes each time it is read (set
// that often) gets ErrLimitChanging.
func (c *Client) Audit(ctx context.Context, r Resource, key string, from, to time.Time) (Audit, error) {
	uid, key, err := userOf(r, key)
	if err != nil {
		return Audit{}, err
	}
	return c.audit(ctx, r, uid, fmt.Sprintf("user %q", key), from, to, func() (balance, error) {
		return c.balance(ctx, r, uid, key)
	})
}

// AuditAccount is Audit for the user whose limit account on r is id (as
// Users lists it): for a user whose key is not kept (see UserInfo.Key).
func (c *Client) AuditAccount(ctx context.Context, r Resource, id ID, from, to time.Time) (Audit, error) {
	if err := r.Validate(); err != nil {
		return Audit{}, err
	}
	return c.audit(ctx, r, id, "user account "+id.String(), from, to, func() (balance, error) {
		a, ok, err := c.lookupAccount(ctx, id)
		if err != nil {
			return balance{}, err
		}
		if !ok || a.Ledger != r.Ledger || a.Code != codeUser {
			return balance{}, fmt.Errorf("%w: no user account %s on %s", ErrUnknownUser, id, r.Name)
		}
		return balanceOf(a)
	})
}

// auditReads bounds how many times audit reads a user whose limit keeps
// changing while it reads.
const auditReads = 8

// audit reads uid's transfers and its limit now (read) and checks them.
// The limit of every instant is worked out back from the limit now through
// the transfers that changed it, so both must be read as of one moment,
// and TigerBeetle reads no two things at once: a transfer that lands after
// the account was read and before its transfers were (a lazy user's
// credit in flight) would make the limit before it look that much lower.
// So the transfers are read first, the limit next, and then the transfers
// after the last one read: when none of those changed the limit, the
// limit read is the one after every transfer read before it. When one
// did, it is added, and the limit and what follows are read again. who
// names the user in an error.
func (c *Client) audit(ctx context.Context, r Resource, uid ID, who string, from, to time.Time, read func() (balance, error)) (Audit, error) {
	ts, err := c.transfersOf(ctx, uid, unixNano(from), 0)
	if err != nil {
		return Audit{}, err
	}
	var b balance
	for n := 0; ; n++ {
		if n == auditReads {
			return Audit{}, fmt.Errorf("%w: the limit of %s on %s changed in each of %d reads", ErrLimitChanging, who, r.Name, n)
		}
		if b, err = read(); err != nil {
			return Audit{}, err
		}
		after := unixNano(from)
		if len(ts) > 0 {
			after = ts[len(ts)-1].Timestamp + 1
		}
		more, err := c.transfersOf(ctx, uid, after, 0)
		if err != nil {
			return Audit{}, err
		}
		ts = append(ts, more...)
		if !slices.ContainsFunc(more, changesLimit) {
			break
		}
	}
	end := unixNano(to)
	var inSpan []tb.Transfer
	for _, t := range ts {
		if end == 0 || t.Timestamp <= end {
			inSpan = append(inSpan, t)
		}
	}
	limits := limitsOver(uid, ts, b.Limit)
	holds := auditHolds(uid, inSpan)
	rep := Audit{Limit: b.Limit}
	if len(inSpan) > 0 {
		rep.LimitMin, rep.LimitMax = limits.within(inSpan[0].Timestamp, inSpan[len(inSpan)-1].Timestamp)
	} else {
		rep.LimitMin, rep.LimitMax = b.Limit, b.Limit
	}
	for _, h := range holds {
		rep.Holds++
		rep.Units += h.amount
		if h.ended {
			rep.Ended++
		}
	}
	rep.checkWindows(holds, uint64(r.Window), limits)
	rep.MostInFlight, rep.InFlightOver = inFlightOver(holds, limits)
	return rep, nil
}

// transfersOf reads every transfer of account uid with a timestamp in
// [from, to] (0: no bound), oldest first.
func (c *Client) transfersOf(ctx context.Context, uid ID, from, to uint64) ([]tb.Transfer, error) {
	f := tb.AccountFilter{AccountID: uid.tb(), TimestampMin: from, TimestampMax: to,
		Flags: tb.AccountFilterFlags{Debits: true, Credits: true}.ToUint32()}
	return all(c.transferPages(ctx, &f, fullPages))
}

// limitSteps is the limit of an account over time: limit[i] from at[i]
// until at[i+1] (the first from the start of time).
type limitSteps struct {
	at    []uint64
	limit []uint64
}

// limitsOver works out the limit of account uid over the span of ts from
// its limit now: each posted transfer of ts changed it (a credit raised
// it, a posted debit, a post of a hold included, lowered it).
func limitsOver(uid ID, ts []tb.Transfer, now uint64) limitSteps {
	type change struct{ at, after uint64 }
	var changes []change // newest first
	cur := now           // the limit just after the transfer considered
	for i := len(ts) - 1; i >= 0; i-- {
		t := ts[i]
		if !changesLimit(t) {
			continue
		}
		amount, _ := u64(t.Amount)
		before := cur
		switch {
		case fromTB(t.CreditAccountID) == uid:
			before = cur - min(cur, amount)
		case fromTB(t.DebitAccountID) == uid:
			before = cur + amount
		}
		if before != cur {
			changes = append(changes, change{t.Timestamp, cur})
			cur = before
		}
	}
	s := limitSteps{at: []uint64{0}, limit: []uint64{cur}}
	for i := len(changes) - 1; i >= 0; i-- {
		s.at = append(s.at, changes[i].at)
		s.limit = append(s.limit, changes[i].after)
	}
	return s
}

// changesLimit reports whether t changed the limit of the accounts it
// moved units between: a posted transfer does (a post of a hold
// included); a hold, and a void of one, do not.
func changesLimit(t tb.Transfer) bool {
	f := t.TransferFlags()
	return !f.Pending && !f.VoidPendingTransfer
}

// atTime is the limit at time t (a change at t applies from t).
func (s limitSteps) atTime(t uint64) uint64 {
	i, _ := slices.BinarySearch(s.at, t+1)
	return s.limit[max(i-1, 0)]
}

// most is the largest limit within [from, to).
func (s limitSteps) most(from, to uint64) uint64 {
	m := s.atTime(from)
	for i, at := range s.at {
		if at > from && at < to {
			m = max(m, s.limit[i])
		}
	}
	return m
}

// within returns the least and most the limit was in [from, to].
func (s limitSteps) within(from, to uint64) (lo, hi uint64) {
	lo, hi = s.atTime(from), s.atTime(from)
	for i, at := range s.at {
		if at > from && at <= to {
			lo, hi = min(lo, s.limit[i]), max(hi, s.limit[i])
		}
	}
	return lo, hi
}

// auditHold is a hold as the audit counts it.
type auditHold struct {
	amount     uint64
	start, end uint64 // when it was taken, and when its units came back (or were spent)
	ended      bool   // by a post or void, before it expired
	kept       uint64 // for a lease given back: the units it had handed out, kept until end
	keptEnd    uint64
}

// auditHolds pairs the holds out of account uid among ts with the posts
// and voids that ended them, and folds each lease's give-back into the
// lease (see regranted).
func auditHolds(uid ID, ts []tb.Transfer) []auditHold {
	byTS := make(map[uint64]*tb.Transfer, len(ts))
	for i := range ts {
		byTS[ts[i].Timestamp] = &ts[i]
	}
	endedAt := map[tb.Uint128]uint64{}
	keptBy := map[tb.Uint128]*tb.Transfer{} // lease -> the hold that keeps its units
	regrant := map[tb.Uint128]bool{}
	for _, t := range ts {
		f := t.TransferFlags()
		if f.PostPendingTransfer || f.VoidPendingTransfer {
			endedAt[t.PendingID] = t.Timestamp
		}
		if next, ok := byTS[t.Timestamp+1]; ok && regranted(t, *next) {
			keptBy[t.PendingID] = next
			regrant[next.ID] = true
		}
	}
	var holds []auditHold
	for _, t := range ts {
		if !t.TransferFlags().Pending || fromTB(t.DebitAccountID) != uid || regrant[t.ID] || t.Code == codeRefundLock {
			continue
		}
		h := auditHold{start: t.Timestamp}
		h.amount, _ = u64(t.Amount)
		h.end = t.Timestamp + uint64(t.Timeout)*uint64(time.Second)
		if at, ok := endedAt[t.ID]; ok && at < h.end {
			h.end, h.ended = at, true
		}
		if k, ok := keptBy[t.ID]; ok {
			h.kept, _ = u64(k.Amount)
			h.keptEnd = k.Timestamp + uint64(k.Timeout)*uint64(time.Second)
			if at, ok := endedAt[k.ID]; ok && at < h.keptEnd {
				h.keptEnd = at
			}
		}
		holds = append(holds, h)
	}
	return holds
}

// checkWindows fills in MostInWindow, WindowStart and Over, for windows of
// w nanoseconds: the units taken by holds not ended early, and the units a
// lease given back had handed out, all from when they were taken.
func (a *Audit) checkWindows(holds []auditHold, w uint64, limits limitSteps) {
	type taken struct{ at, amount uint64 }
	var kept []taken
	for _, h := range holds {
		switch {
		case h.kept > 0:
			kept = append(kept, taken{h.start, h.kept})
		case !h.ended:
			kept = append(kept, taken{h.start, h.amount})
		}
	}
	slices.SortFunc(kept, func(x, y taken) int { return cmp.Compare(x.at, y.at) })
	var sum uint64
	j := 0
	for _, h := range kept {
		sum += h.amount
		for kept[j].at+w <= h.at {
			sum -= kept[j].amount
			j++
		}
		start := kept[j].at
		if sum > a.MostInWindow {
			a.MostInWindow, a.WindowStart = sum, time.Unix(0, int64(start))
		}
		over := sum > limits.most(start, start+w)
		if over && len(a.Over) < 100 && (len(a.Over) == 0 || uint64(a.Over[len(a.Over)-1].UnixNano()) != start) {
			a.Over = append(a.Over, time.Unix(0, int64(start)))
		}
	}
}

// inFlightOver returns the most units the holds held at one instant, and
// whether they ever held more than the limit of the instant.
func inFlightOver(holds []auditHold, limits limitSteps) (uint64, bool) {
	type edge struct {
		at    uint64
		delta int64
	}
	edges := make([]edge, 0, 2*len(holds))
	for _, h := range holds {
		edges = append(edges, edge{h.start, int64(h.amount)}, edge{h.end, -int64(h.amount)})
		if h.kept > 0 {
			edges = append(edges, edge{h.end, int64(h.kept)}, edge{h.keptEnd, -int64(h.kept)})
		}
	}
	slices.SortFunc(edges, func(x, y edge) int {
		if c := cmp.Compare(x.at, y.at); c != 0 {
			return c
		}
		return cmp.Compare(x.delta, y.delta) // units return before others are taken
	})
	var cur, best int64
	over := false
	for _, e := range edges {
		cur += e.delta
		best = max(best, cur)
		over = over || (e.delta > 0 && uint64(cur) > limits.atTime(e.at))
	}
	return uint64(best), over
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}
