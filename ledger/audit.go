package ledger

import (
	"cmp"
	"context"
	"slices"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Audit is what a user's account on a resource recorded over a span of
// time, checked against the user's limit: the sliding window check of what
// TigerBeetle holds, independent of any Client's view.
type Audit struct {
	// Limit is the limit checked against: the user's limit now.
	Limit uint64
	// Holds and Units count the holds taken in the span (pending transfers
	// out of the account: decisions, reservations, leases) and their units.
	Holds int
	Units uint64
	// Ended counts the holds ended early by a post or void (a Reservation's
	// Commit or Cancel, a lease's give-back): their units are not counted
	// in MostInWindow, which checks the promise that units return only by
	// expiring.
	Ended int
	// MostInWindow is the most units taken, by holds not ended early,
	// within any interval of one window, and WindowStart where the first
	// such interval starts. It is at most Limit when the promise held.
	MostInWindow uint64
	WindowStart  time.Time
	// MostInFlight is the most units held at any instant (holds ended
	// early count until they ended): at most Limit, which TigerBeetle
	// enforces itself.
	MostInFlight uint64
	// Over lists the intervals of one window in which more than Limit units
	// were taken, by their start (at most 100).
	Over []time.Time
}

// OK reports whether nothing was over the limit.
func (a Audit) OK() bool { return a.MostInWindow <= a.Limit && a.MostInFlight <= a.Limit }

// Audit reads every transfer out of user key's account on r taken from
// from until to (cluster time) and checks that no interval of one window
// holds more units than the user's limit, and that no instant holds more
// in flight. It reads what the cluster recorded, not this Client's view,
// so that it can check any process's decisions, a production ledger's
// included. The limit is the user's limit now: a limit changed within the
// span makes the check stricter or looser than the limit of the time.
func (c *Client) Audit(ctx context.Context, r Resource, key string, from, to time.Time) (Audit, error) {
	uid, b, err := c.account(ctx, r, key)
	if err != nil {
		return Audit{}, err
	}
	ts, err := c.debits(ctx, uid, unixNano(from), unixNano(to))
	if err != nil {
		return Audit{}, err
	}
	holds := auditHolds(ts)
	rep := Audit{Limit: b.Limit}
	for _, h := range holds {
		rep.Holds++
		rep.Units += h.amount
		if h.ended {
			rep.Ended++
		}
	}
	rep.checkWindows(holds, uint64(r.Window))
	rep.MostInFlight = mostInFlight(holds)
	return rep, nil
}

// debits reads every transfer out of account uid with a timestamp in
// [from, to] (0: no bound), oldest first.
func (c *Client) debits(ctx context.Context, uid ID, from, to uint64) ([]tb.Transfer, error) {
	f := tb.AccountFilter{AccountID: uid.tb(), TimestampMin: from, TimestampMax: to,
		Flags: tb.AccountFilterFlags{Debits: true}.ToUint32()}
	var out []tb.Transfer
	for {
		got, err := c.conn.AccountTransfers(ctx, &f, BatchMax)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		if len(got) < int(f.Limit) || len(got) == 0 {
			return out, nil
		}
		f.TimestampMin = got[len(got)-1].Timestamp + 1
	}
}

// auditHold is a hold as the audit counts it.
type auditHold struct {
	amount     uint64
	start, end uint64 // when it was taken, and when its units came back (or were spent)
	ended      bool   // by a post or void, before it expired
}

// auditHolds pairs the holds among ts with the posts and voids that ended
// them.
func auditHolds(ts []tb.Transfer) []auditHold {
	endedAt := map[tb.Uint128]uint64{}
	for _, t := range ts {
		if f := t.TransferFlags(); f.PostPendingTransfer || f.VoidPendingTransfer {
			endedAt[t.PendingID] = t.Timestamp
		}
	}
	var holds []auditHold
	for _, t := range ts {
		if !t.TransferFlags().Pending {
			continue
		}
		amount, _ := u64(t.Amount)
		h := auditHold{amount: amount, start: t.Timestamp, end: t.Timestamp + uint64(t.Timeout)*uint64(time.Second)}
		if at, ok := endedAt[t.ID]; ok && at < h.end {
			h.end, h.ended = at, true
		}
		holds = append(holds, h)
	}
	return holds
}

// checkWindows fills in MostInWindow, WindowStart and Over from the holds
// not ended early, for windows of w nanoseconds.
func (a *Audit) checkWindows(holds []auditHold, w uint64) {
	var kept []auditHold
	for _, h := range holds {
		if !h.ended {
			kept = append(kept, h)
		}
	}
	slices.SortFunc(kept, func(x, y auditHold) int { return cmp.Compare(x.start, y.start) })
	var sum uint64
	j := 0
	for i, h := range kept {
		sum += h.amount
		for kept[j].start+w <= h.start {
			sum -= kept[j].amount
			j++
		}
		if sum > a.MostInWindow {
			a.MostInWindow, a.WindowStart = sum, time.Unix(0, int64(kept[j].start))
		}
		if sum > a.Limit && len(a.Over) < 100 && (len(a.Over) == 0 || i == 0 || kept[j].start != uint64(a.Over[len(a.Over)-1].UnixNano())) {
			a.Over = append(a.Over, time.Unix(0, int64(kept[j].start)))
		}
	}
}

// mostInFlight is the most units the holds held at one instant.
func mostInFlight(holds []auditHold) uint64 {
	type edge struct {
		at    uint64
		delta int64
	}
	edges := make([]edge, 0, 2*len(holds))
	for _, h := range holds {
		edges = append(edges, edge{h.start, int64(h.amount)}, edge{h.end, -int64(h.amount)})
	}
	slices.SortFunc(edges, func(x, y edge) int {
		if c := cmp.Compare(x.at, y.at); c != 0 {
			return c
		}
		return cmp.Compare(x.delta, y.delta) // units return before others are taken
	})
	var cur, best int64
	for _, e := range edges {
		cur += e.delta
		best = max(best, cur)
	}
	return uint64(best)
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}
