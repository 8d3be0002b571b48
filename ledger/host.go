package ledger

import (
	"context"
	"fmt"
	"math"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/internal/pipeline"
	"github.com/tblimit/tblimit/ledger/internal/status"
	"github.com/tblimit/tblimit/ledger/internal/view"
)

// host is a Client as its pipeline sees it (pipeline.Host): the users'
// views, what the pipeline's answers teach them, and the Decisions they
// describe. The runner calls it one batch at a time (see package
// pipeline); every method that reads or writes a view takes its user's
// lock.
type host struct{ c *Client }

var _ pipeline.Host[*user, Decision] = host{}

// Nows reads this Client's clock once and returns it with the cluster's
// clock estimated from it (see clusterNow).
func (h host) Nows() (int64, uint64) { return h.c.nows() }

// Clock learns the cluster's time from a batch's answer: its latest
// timestamp against this Client's clock when the answer came (an
// underestimate of the cluster's clock by up to a round trip, so that what
// is computed from it returns late rather than early).
func (h host) Clock(last uint64, now int64) {
	c := h.c
	c.skew.Store(int64(last) - now)
	c.lastTS, c.lastLocal = last, now
}

// ReadsDue reports whether views are due a read or a scan.
func (h host) ReadsDue() bool { return h.c.readsDue() }

// Refresh reads the accounts of the views due a read, and scans the
// transfers of those due a scan.
func (h host) Refresh() {
	h.c.readBack()
	h.c.scanBack()
}

// Read reads the accounts of us into their views.
func (h host) Read(ctx context.Context, us []*user) error { return h.c.read(ctx, us) }

// Check answers ch at t from its user's view, just read (see answerCheck).
func (h host) Check(ch check, t uint64) (Decision, error) { return h.c.answerCheck(ch, t) }

// Accounts are the accounts a first sight of u creates.
func (h host) Accounts(u *user) []tb.Account { return userAccounts(u.res, u.key) }

// AccountError is the error of the calls that provision u when its
// account i of a batch's create_accounts answered s.
func (h host) AccountError(u *user, i int, s tb.CreateAccountStatus) error {
	return fmt.Errorf("ledger: provision %q: %w", u.key, accountStatusError(i, s))
}

// Credit is the provisioning credit of u's limit account.
func (h host) Credit(u *user, limit uint64) tb.Transfer {
	return provisionTransfer(u.res, u.key, limit)
}

// Sighted teaches u's view what the answer to its sight says: a user
// credited (now or before) is provisioned, and one whose accounts and
// credit this batch made knows its limit and holds nothing else (its view
// is complete). It comes before the sight's holds are learnt, so that they
// are described against the limit.
func (h host) Sighted(u *user, limit uint64, account tb.CreateAccountStatus, credit tb.CreateTransferResult, now int64) {
	cr := status.ClassifyCredit(credit.Status)
	if cr == status.CreditFailed {
		return // its hold fails as well, and decide says why
	}
	u.lock()
	v := &u.v
	v.Provisioned = true
	switch {
	case status.AccountNew(account) && cr == status.CreditNow:
		v.KnowLimit(limit, now)
	case cr == status.CreditNow:
		// Credited with this limit, now or before: the limit it was
		// given, until a read says whether it changed since.
		v.AssumeLimit(limit)
	}
	u.mu.Unlock()
}

// Settle teaches the users of events what the results of their transfers
// say, counts each decision, and appends to ds the Decision of each
// deciding hold if out.Decided (see describeHold).
func (h host) Settle(events []pipeline.Event[*user], chain []tb.Transfer, res []tb.CreateTransferResult, out pipeline.Outcome, now int64, ds []Decision) []Decision {
	for _, e := range events {
		u, t, s := e.User, &chain[e.I], res[e.I]
		u.lock()
		h.c.learn(u, t, s, now)
		if e.Decide && out.Decided {
			ds = append(ds, describeHold(&u.v, t, s, &out))
		}
		h.c.noteUse(u, now)
		u.mu.Unlock()
	}
	return ds
}

// Describe describes the deciding holds of events again, into ds, from
// their users' views.
func (h host) Describe(events []pipeline.Event[*user], chain []tb.Transfer, res []tb.CreateTransferResult, out pipeline.Outcome, ds []Decision) {
	k := 0
	for _, e := range events {
		if !e.Decide {
			continue
		}
		e.User.lock()
		ds[k] = describeHold(&e.User.v, &chain[e.I], res[e.I], &out)
		e.User.mu.Unlock()
		k++
	}
}

// Merge decides how u's mergeable holds of a batch go: in one transfer
// those that fit, as far as u's view knows; denied without being sent
// those that do not fit when the view is confirmed (Deny); alone the
// others, and every one when the view is not complete.
func (h host) Merge(u *user, amounts []uint64, in, denied []bool, ds []Decision) tb.Transfer {
	now, t := h.c.nows()
	var total uint64
	n := 0
	u.lock()
	trusted := u.v.Complete()
	left := u.v.Available(t)
	for i, amount := range amounts {
		switch {
		case trusted && amount <= left:
			in[i] = true
			left -= amount
			total += amount
			n++
		case trusted && u.v.Deny(amount, t, now):
			denied[i] = true
			ds[i] = localDenial(&u.v, amount, t)
		}
	}
	u.mu.Unlock()
	if n < 2 {
		return tb.Transfer{}
	}
	return newHold(u.res, u.id, total, tb.TransferFlags{})
}

// SettleMerged teaches u's view what result s of merged transfer t says,
// and, when it was created, describes each of its holds (of amounts): each
// reports the units of the holds after it as if they came one by one.
func (h host) SettleMerged(u *user, t *tb.Transfer, s tb.CreateTransferResult, amounts []uint64, now int64, ds []Decision) {
	u.lock()
	defer u.mu.Unlock()
	h.c.learn(u, t, s, now)
	if ds == nil {
		return
	}
	at := s.Timestamp
	var later uint64
	for j := len(amounts) - 1; j >= 0; j-- {
		ds[j] = decisionOf(u.v.SpareReport(at, later), true, Admitted, fromTB(t.ID), at)
		later += amounts[j]
		h.c.noteUse(u, now)
	}
}

// Marker is the marker of request ID key for chain (see keyMarker).
func (h host) Marker(key tb.Uint128, chain []tb.Transfer) tb.Transfer {
	return keyMarker(fromTB(key), chain)
}

// NewID returns a new transfer ID.
func (h host) NewID() tb.Uint128 { return NewID().tb() }

// learn teaches u's view what transfer t's result s says. u.mu is held.
func (c *Client) learn(u *user, t *tb.Transfer, s tb.CreateTransferResult, now int64) {
	flags := t.TransferFlags()
	switch {
	case flags.Pending:
		amount, _ := u64(t.Amount)
		switch status.Classify(s.Status) {
		case status.Admitted:
			u.v.Provisioned = true
			if flags.BalancingDebit {
				// A charge (Client.Charge) took at most what remained:
				// what the view knows remained, else it no longer knows.
				amount = u.v.Charged(amount, s.Timestamp)
			} else {
				u.v.Admitted(amount, s.Timestamp)
			}
			u.v.Took(fromTB(t.ID), amount, s.Timestamp+uint64(t.Timeout)*uint64(time.Second))
		case status.Denied:
			u.v.Denied(amount, s.Timestamp, now)
			if !u.v.Complete() && !u.v.ScanQueued && now-u.v.ScanLocal >= int64(view.Recheck) {
				u.v.ScanQueued = true // denied, and it does not know when units return
				c.reads.scans.push(u)
			}
		}
	case flags.PostPendingTransfer || flags.VoidPendingTransfer:
		if status.ClassifyEnd(s.Status) == status.EndedNow {
			var kept uint64 // a void keeps nothing; a post its amount, all of the hold when it does not fit
			if flags.PostPendingTransfer {
				if n, fits := u64(t.Amount); fits {
					kept = n
				} else {
					kept = math.MaxUint64
				}
			}
			u.v.Ended(fromTB(t.PendingID), kept)
		}
	}
}

// describeHold is the Decision of hold t, whose result is s, from its
// user's view v just after the answer to its chain, which out describes.
// A request with a caller's ID is known by it, and an admission an earlier
// attempt made by that attempt's timestamp. The user's lock is held.
func describeHold(v *view.View, t *tb.Transfer, s tb.CreateTransferResult, out *pipeline.Outcome) Decision {
	amount, _ := u64(t.Amount)
	at := s.Timestamp
	id := fromTB(t.ID)
	if out.Key != (tb.Uint128{}) {
		id = fromTB(out.Key)
	}
	switch {
	case out.Failed && out.PaymentDenied:
		return decisionOf(v.Report(at), false, InsufficientFunds, id, at)
	case out.Failed && (status.Classify(s.Status) == status.Denied || amount > v.Available(at)):
		return decisionOf(v.DenialReport(amount, at), false, LimitExceeded, id, at)
	case out.Failed: // it would have fitted: another part of the chain failed
		return decisionOf(v.Report(at), false, Admitted, id, at)
	}
	r := v.SpareReport(at, out.Spare)
	if out.Earlier != 0 {
		r.Stamp = out.Earlier
	}
	return decisionOf(r, true, Admitted, id, at)
}

// noteUse counts a decision of u and queues u for a read when its view is
// due one. u.mu is held.
func (c *Client) noteUse(u *user, now int64) {
	c.reads.earn(1)
	if u.v.Uses < math.MaxUint16 { // only whether it passed 2 matters
		u.v.Uses++
	}
	if u.v.Queued {
		return
	}
	due := !u.v.Complete()
	if !due && u.v.Uses >= 2 {
		due = now-u.v.ReadLocal >= int64(refreshEvery)
	}
	if due {
		u.v.Queued = true
		c.reads.users.push(u)
	}
}

// localNow is this Client's clock in nanoseconds.
func (c *Client) localNow() int64 { return c.now().UnixNano() }

// clusterNow estimates the cluster's clock (from below, on a cluster).
func (c *Client) clusterNow() uint64 {
	_, t := c.nows()
	return t
}

// nows reads this Client's clock once and returns it with the cluster's
// clock estimated from it (see clusterNow).
func (c *Client) nows() (int64, uint64) {
	now := c.localNow()
	if c.conn.InProcess() {
		return now, uint64(now) // the engine's own clock
	}
	return now, uint64(now + c.skew.Load())
}
