package ledger

import (
	"context"
	"fmt"
	"math"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// End says how the hold of an admission ended.
type End uint8

const (
	// InFlight: the units are held still; they return when the hold expires.
	InFlight End = iota
	// Expired: the units returned by expiring, one window after they were
	// taken, as every decision's do.
	Expired
	// Committed: the hold was ended by Reservation.Commit, which keeps
	// what it committed (Admission.Kept) until the window ends; or posted,
	// its units never to return (SetLimit lowering a limit while units were
	// in flight).
	Committed
	// Cancelled: the hold was voided and its units returned early
	// (Reservation.Cancel, Reset, or a lease giving back what it did not use).
	Cancelled
)

// String returns "in flight", "expired", "committed" or "cancelled".
func (e End) String() string {
	switch e {
	case InFlight:
		return "in flight"
	case Expired:
		return "expired"
	case Committed:
		return "committed"
	case Cancelled:
		return "cancelled"
	}
	return fmt.Sprintf("End(%d)", uint8(e))
}

// Admission is one admission of a user on a resource as the cluster
// recorded it: the pending transfer (the hold) that took the units, and how
// it ended. A decision of Acquire, a Reservation, a payment's hold and a
// lease are one admission each; decisions merged by coalescing, or admitted
// from one lease, share theirs (their Decision.ID names it).
type Admission struct {
	// ID names the request, as Decision.ID did: the caller's Request.ID (or
	// Payment.ID), or the ID the Client gave the request.
	ID ID
	// Hold is the transfer that took the units. It is ID, unless the
	// request was admitted by a later attempt under its ID (see Request.ID)
	// or the hold is not the first of an AcquireAll chain.
	Hold ID
	// Taken is the cluster time the units were taken.
	Taken time.Time
	// Amount is how many units were taken, and Ref the Request.Ref stored
	// with them.
	Amount uint64
	Ref    uint64
	// End says how the hold ended, and Ended when: the instant it expired
	// (Expired) or will expire (InFlight), or the cluster time of its post
	// (Committed) or void (Cancelled).
	End   End
	Ended time.Time
	// Kept is set when the hold was ended and some of its units taken
	// again at once, linked to its end, until the hold would have expired:
	// by Reservation.Commit (End Committed: what the work used), or by a
	// lease that ended with units unused (End Cancelled: the units it had
	// handed out). Kept is that second hold (its Amount the units kept, its
	// End and Ended when they came back).
	Kept *Admission
	// Payment is, for the hold of a money resource, the payment that was
	// made with it (see Pay); nil for other holds.
	Payment *Paid
}

// Paid is a payment made under a money limit, as the cluster recorded it.
type Paid struct {
	// ID is the payment's transfer on the currency ledger.
	ID ID
	// To is the account paid on the currency ledger, and ToKey its user's
	// key ("" for a long key kept by no name account: see Users).
	To    ID
	ToKey string
	// Amount is how much was paid, in the currency's smallest unit, and
	// Time the cluster time it was paid.
	Amount uint64
	Time   time.Time
}

// History lists user key's admissions on r whose units were taken from
// from until to (cluster time, both included; a zero time is no bound),
// the newest first, at most max of them (0: all), with how each ended. For
// a money resource each admission comes with its payment. It reads what
// the cluster recorded (get_account_transfers, newest first, page by
// page), not this Client's view, so it shows every process's admissions.
//
// A hold's post or void is found when it was made within the hold's own
// timeout, which is so for every hold this package takes; with to set, the
// transfers of up to a window after to are read to find them. Holds that
// SetLimit takes to keep a lowered limit are not admissions and are left
// out.
func (c *Client) History(ctx context.Context, r Resource, key string, from, to time.Time, max int) ([]Admission, error) {
	key, err := NormalizeKey(key)
	if err != nil {
		return nil, err
	}
	uid, _, err := c.account(ctx, r, key)
	if err != nil {
		return nil, err
	}
	s := newHistoryScan(clusterTime(from), clusterTime(to), uint64(c.now().UnixNano()), max)
	if s.to != 0 && s.to < s.from {
		return nil, nil
	}
	if err := c.scanHistory(ctx, uid, maxTimeout(r.Window), s); err != nil {
		return nil, err
	}
	if r.Kind == KindMoney && len(s.out) > 0 {
		if err := c.payments(ctx, r.Currency, key, s.out); err != nil {
			return nil, err
		}
	}
	return s.out, nil
}

// clusterTime is t as a cluster timestamp, 0 (no bound) for the zero time
// and 1 for any time not after the Unix epoch.
func clusterTime(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(max(t.UnixNano(), 1))
}

// scanHistory reads the transfers out of account uid into s, newest
// first, until s has what it needs. Posts and voids are newer than the
// holds they end, so the scan starts up to longest (the longest timeout of
// a hold) after s.to, and a hold's end is known when the hold is read. It
// reads one transfer before s.from, which may be the void a give-back's
// hold at s.from belongs to.
func (c *Client) scanHistory(ctx context.Context, uid ID, longest time.Duration, s *historyScan) error {
	f := tb.AccountFilter{
		AccountID:    uid.tb(),
		TimestampMin: max(s.from, 2) - 1,
		Flags:        tb.AccountFilterFlags{Debits: true, Reversed: true}.ToUint32(),
	}
	if s.to != 0 {
		f.TimestampMax = s.to + min(uint64(longest), math.MaxUint64-s.to)
	}
	// Pages grow from about twice what max asks (holds come with their
	// posts and voids), so that a short history reads little.
	want := uint32(BatchMax)
	if s.max > 0 {
		want = uint32(min(BatchMax, max(32, 2*(s.max+1))))
	}
	size := func() uint32 {
		w := want
		want = min(2*want, BatchMax)
		return w
	}
	for got, err := range c.transferPages(ctx, &f, size) {
		if err != nil {
			return err
		}
		for _, t := range got {
			if s.add(t) {
				s.out = s.out[:s.max]
				return nil
			}
		}
	}
	return nil
}

// historyScan builds admissions from an account's transfers read newest
// first.
type historyScan struct {
	from, to, now uint64
	max           int
	ends          map[tb.Uint128]holdEnd     // posts and voids read, by the hold they end
	kept          map[tb.Uint128]tb.Transfer // the holds of give-backs, by the hold given back
	prev          tb.Transfer                // the transfer read last: the next newer one
	prevListed    bool                       // prev is out's last admission
	out           []Admission
}

type holdEnd struct {
	end End
	at  uint64
}

func newHistoryScan(from, to, now uint64, max int) *historyScan {
	return &historyScan{from: from, to: to, now: now, max: max,
		ends: map[tb.Uint128]holdEnd{}, kept: map[tb.Uint128]tb.Transfer{}}
}

// add reads the next older transfer, and reports whether the scan has
// found more than max admissions: the first max are then final (whether an
// admission is a give-back's hold is known once the transfer after it is
// read).
func (s *historyScan) add(t tb.Transfer) bool {
	flags := t.TransferFlags()
	listed := false
	switch {
	case flags.PostPendingTransfer || flags.VoidPendingTransfer:
		e := holdEnd{end: Committed, at: t.Timestamp}
		if flags.VoidPendingTransfer && fromTB(t.ID) != endID(roleCommit, fromTB(t.PendingID)) {
			e.end = Cancelled // a Commit voids too, and holds what it keeps again
		}
		s.ends[t.PendingID] = e
		if regranted(t, s.prev) {
			// A give-back: s.prev took the kept units again.
			s.kept[t.PendingID] = s.prev
			if s.prevListed {
				s.out = s.out[:len(s.out)-1]
			}
		}
	case flags.Pending && t.Code != codeRefundLock && t.Timestamp >= s.from && (s.to == 0 || t.Timestamp <= s.to):
		s.out = append(s.out, s.admission(t))
		listed = true
	}
	s.prev, s.prevListed = t, listed
	return s.max > 0 && len(s.out) > s.max
}

// admission is hold t as an admission, with its end (read already: it is
// newer) and the hold of its give-back, if any.
func (s *historyScan) admission(t tb.Transfer) Admission {
	amount, _ := u64(t.Amount)
	a := Admission{ID: fromTB(t.ID), Hold: fromTB(t.ID), Taken: time.Unix(0, int64(t.Timestamp)), Amount: amount, Ref: t.UserData64}
	if t.UserData128 != (tb.Uint128{}) {
		a.ID = fromTB(t.UserData128) // a later attempt under a request ID, or a chain's later hold
	}
	a.End, a.Ended = s.fate(t)
	if k, ok := s.kept[t.ID]; ok {
		kept := s.admission(k)
		kept.ID = a.ID
		a.Kept = &kept
	}
	return a
}

// fate says how hold t ended, and when.
func (s *historyScan) fate(t tb.Transfer) (End, time.Time) {
	if e, ok := s.ends[t.ID]; ok {
		return e.end, time.Unix(0, int64(e.at))
	}
	expires := t.Timestamp + uint64(t.Timeout)*uint64(time.Second)
	if expires <= s.now {
		return Expired, time.Unix(0, int64(expires))
	}
	return InFlight, time.Unix(0, int64(expires))
}

// payments finds the payments made with the holds among out, on user
// key's account of currency ledger currency: each is linked to its hold,
// one event later in the same batch, and carries the
// request's name (the admission's ID) in user_data_128.
func (c *Client) payments(ctx context.Context, currency uint32, key string, out []Admission) error {
	byID := make(map[ID]int, len(out))
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for i, a := range out {
		byID[a.ID] = i
		ts := uint64(a.Taken.UnixNano())
		lo, hi = min(lo, ts), max(hi, ts)
	}
	f := tb.AccountFilter{
		AccountID:    CurrencyUserID(currency, key).tb(),
		TimestampMin: lo + 1,
		TimestampMax: hi + 1,
		Flags:        tb.AccountFilterFlags{Debits: true}.ToUint32(),
	}
	payees := map[ID][]*Paid{}
	for got, err := range c.transferPages(ctx, &f, fullPages) {
		if err != nil {
			return err
		}
		for _, t := range got {
			i, ok := byID[fromTB(t.UserData128)]
			if !ok || t.Code != codePayment || out[i].Payment != nil {
				continue
			}
			amount, _ := u64(t.Amount)
			p := &Paid{ID: fromTB(t.ID), To: fromTB(t.CreditAccountID), Amount: amount, Time: time.Unix(0, int64(t.Timestamp))}
			out[i].Payment = p
			payees[p.To] = append(payees[p.To], p)
		}
	}
	return c.payees(ctx, currency, payees)
}

// payees fills in the keys of the accounts paid, where the accounts store
// them.
func (c *Client) payees(ctx context.Context, currency uint32, paid map[ID][]*Paid) error {
	if len(paid) == 0 {
		return nil
	}
	ids := make([]ID, 0, len(paid))
	for id := range paid {
		ids = append(ids, id)
	}
	as, err := c.lookupAccounts(ctx, ids)
	if err != nil {
		return err
	}
	var unnamed []ID
	for _, a := range as {
		key := keyFromUserData(a.UserData128)
		if key == "" || CurrencyUserID(currency, key) != fromTB(a.ID) {
			unnamed = append(unnamed, fromTB(a.ID))
			continue
		}
		for _, p := range paid[fromTB(a.ID)] {
			p.ToKey = key
		}
	}
	long, err := c.longKeys(ctx, currency, unnamed, func(key string) ID { return CurrencyUserID(currency, key) })
	for id, key := range long {
		for _, p := range paid[id] {
			p.ToKey = key
		}
	}
	return err
}

// regranted reports whether next holds again units of the hold that void
// voided, as the chain of regrant does: the void is linked, and next is a
// hold, the next event of the same batch. History and Audit fold such a
// pair into one admission.
func regranted(void, next tb.Transfer) bool {
	vf := void.TransferFlags()
	return vf.VoidPendingTransfer && vf.Linked && next.TransferFlags().Pending && next.Timestamp == void.Timestamp+1
}
