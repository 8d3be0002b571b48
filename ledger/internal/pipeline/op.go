package pipeline

import (
	"context"
	"iter"
	"slices"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/internal/status"
)

// Spec is what a call asks of the pipeline besides its chain: how its
// answer is read. It holds no pointer, so that a call's spec and steps
// stay on its stack.
type Spec struct {
	Key   tb.Uint128 // the caller's ID for the request, or zero
	Exact bool       // read the accounts of its holds before answering
	Pays  uint16     // a payment's: the code of its chain's transfer that pays (0: not a payment)
	Merge bool       // one hold without a caller's ID: coalescing may merge it
	Spare uint64     // units its hold takes beyond the call's (a lease's renewal), reported as taken
}

// Step is a transfer of a call's chain: a hold the caller wants a decision
// for (Decide), or another transfer, which takes or ends a hold of User if
// User is not the zero U.
type Step[U comparable] struct {
	T      tb.Transfer
	User   U
	Decide bool
}

// Event is a transfer of an op's chain that holds or ends units of a
// user: a pending transfer debiting the user's limit account, or the post
// or void of one.
type Event[U comparable] struct {
	I      int  // index in the chain
	User   U    // the user whose limit account it debits
	Decide bool // the caller wants a decision for this hold
}

// Check is a check of Amount units of User, under its plan's limit (Plan;
// 0: none): no chain, answered by a read of the user's account.
type Check[U comparable] struct {
	User   U
	Amount uint64
	Plan   uint64
}

// sight is a user of a lazy resource an op provisions before its holds:
// the user's accounts are created, and its limit credited (see
// Op.Provision).
type sight[U comparable] struct {
	u     U
	limit uint64
	// The answer, handed over by the runner.
	accounts tb.CreateAccountStatus  // of its limit account
	credit   tb.CreateTransferResult // of its credit, if this op sent it
	credited bool                    // this op's batch carried its credit ahead of this op's holds
	acct     int                     // where its limit account is in the batch's accounts
	at       int                     // where its credit is in the batch's transfers, if credited
}

// Op is one call's work in the pipeline: what it asked (made by New), its
// chain as sent, and the answer the runner gives it. The caller reads the
// answer once Submit returns without an error, and changes nothing of an
// op but Merge and Answered.
type Op[U comparable, D any] struct {
	// Room for the common case, one hold, without allocating.
	chain1  [1]tb.Transfer
	events1 [1]Event[U]
	ds1     [1]D

	Chain   []tb.Transfer // as last sent
	Events  []Event[U]    // the chain's holds and ends of holds, in chain order
	sights  []sight[U]
	sights1 [1]sight[U]
	checks  []Check[U]
	key     tb.Uint128
	ctx     context.Context // the caller's, for a request observer (see Calls)
	Marked  bool            // the chain starts with its key's marker (a later attempt under the key)
	pays    uint16
	Merge   bool // see Spec; cleared when the op must go alone
	exact   bool
	spare   uint64

	// The answer.
	Res     []tb.CreateTransferResult // one per transfer of Chain
	Ds      []D                       // one per deciding hold, when every event was admitted, denied or linked
	shared  tb.Uint128                // the merged transfer that took its units (coalescing), if any
	Retry   bool                      // a merged transfer was refused, or a check came while a batch completed: send it again
	Earlier bool                      // admitted by an earlier attempt under its key (TigerBeetle answered exists)
	Local   bool                      // decided without being sent
	err     error                     // the batch's request failed

	// Answered says that the pipeline is done with the op: its last
	// attempt was answered and completed, so the runner no longer uses it
	// (its buffers may still point at it until their next turn, which only
	// overwrites them; see Free). The caller sets it.
	Answered bool
}

// Deciding yields the events of o's deciding holds, each with its index
// among them (that of its part in the caller's parts).
func (o *Op[U, D]) Deciding() iter.Seq2[int, Event[U]] {
	return func(yield func(int, Event[U]) bool) {
		k := 0
		for _, e := range o.Events {
			if !e.Decide {
				continue
			}
			if !yield(k, e) {
				return
			}
			k++
		}
	}
}

// Provision makes u, a user of a lazy resource, provisioned ahead of o's
// holds, with limit: its accounts are created in the batch's
// create_accounts, and its limit credited in the batch's create, ahead of
// o's chain. Such an op goes alone (coalescing has no place for the
// credit ahead of a merged transfer).
func (o *Op[U, D]) Provision(u U, limit uint64) {
	if o.sights == nil {
		o.sights = o.sights1[:0]
	}
	o.sights = append(o.sights, sight[U]{u: u, limit: limit})
	o.Merge = false
}

// Unsighted drops what o provisions (see Provision), before it is sent
// again.
func (o *Op[U, D]) Unsighted() { o.sights = o.sights[:0] }

// DecidingResults returns the results of o's deciding chain: the linked
// chain that holds the units the caller asked for (an op may also carry a
// chain that ends an earlier hold, a lease's).
func (o *Op[U, D]) DecidingResults() []tb.CreateTransferResult {
	start := o.DecidingStart()
	if start < 0 || o.Res == nil {
		return nil
	}
	end := start
	for end < len(o.Chain)-1 && o.Chain[end].TransferFlags().Linked {
		end++
	}
	return o.Res[start : end+1]
}

// DecidingStart is the index in o's chain where its deciding chain starts,
// or -1 if it has none.
func (o *Op[U, D]) DecidingStart() int {
	start := o.FirstHold()
	for start > 0 && o.Chain[start-1].TransferFlags().Linked {
		start--
	}
	return start
}

// FirstHold is the index in o's chain of its first deciding hold, or -1.
func (o *Op[U, D]) FirstHold() int {
	for _, e := range o.Events {
		if e.Decide {
			return e.I
		}
	}
	return -1
}

// Name is what names o's request: its caller's ID, else the ID of its
// first hold.
func (o *Op[U, D]) Name() tb.Uint128 {
	if o.key != (tb.Uint128{}) {
		return o.key
	}
	return o.Chain[o.FirstHold()].ID
}

// Reset clears o's answer, to send it again.
func (o *Op[U, D]) Reset() {
	o.Res, o.Ds, o.shared, o.Retry, o.Local, o.err = nil, nil, tb.Uint128{}, false, false, nil
}

// ChainOutcome reports whether a chain's results say it failed, and
// whether they decide it: every event admitted, denied, or failed with it.
// A chain that failed although one of its events was created existed
// already (TigerBeetle answers exists, which fails the rest of the chain):
// earlier says so, and it counts as admitted.
func ChainOutcome(res []tb.CreateTransferResult) (failed, decided, earlier bool) {
	decided = true
	created := false
	for _, s := range res {
		switch status.Classify(s.Status) {
		case status.Admitted:
			created = true
		case status.Denied, status.Linked:
			failed = true
		default:
			failed, decided = true, false
		}
	}
	if failed && decided && created {
		return false, true, true
	}
	return failed, decided, false
}

// Spent reports whether a result says that an earlier attempt under the
// same ID failed (TigerBeetle keeps failed IDs for ever).
func Spent(res []tb.CreateTransferResult) bool {
	for _, s := range res {
		if status.Classify(s.Status) == status.Spent {
			return true
		}
	}
	return false
}

// Outcome is what the answer to an op's chain says of its deciding holds,
// besides their users' views and their transfers' results (see
// Host.Settle).
type Outcome struct {
	Decided       bool       // every event was admitted, denied or failed with the chain: describe its deciding holds
	Failed        bool       // the chain failed
	PaymentDenied bool       // its payment failed for want of funds
	Key           tb.Uint128 // what names the request, if not zero; else each hold's own ID
	Spare         uint64     // see Spec
	// Earlier is the timestamp of the earlier attempt under the request's
	// ID that admitted it (TigerBeetle echoes the original's), or 0.
	Earlier uint64
}

// outcome is what o's answer says of its deciding holds.
func (o *Op[U, D]) outcome() Outcome {
	failed, decided, earlier := ChainOutcome(o.DecidingResults())
	out := Outcome{Decided: decided, Failed: failed, Key: o.key, Spare: o.spare}
	if failed && o.pays != 0 {
		out.PaymentDenied = o.paymentDenied()
	}
	if earlier {
		out.Earlier = o.earlierTS() // an admission's timestamp: never 0
	}
	return out
}

// earlierTS is the timestamp of the transfer of o's chain that existed
// already.
func (o *Op[U, D]) earlierTS() uint64 {
	for _, s := range o.DecidingResults() {
		if status.Classify(s.Status) == status.Admitted {
			return s.Timestamp
		}
	}
	return 0
}

// paymentDenied reports whether o's payment itself failed for want of
// funds.
func (o *Op[U, D]) paymentDenied() bool {
	for i, t := range o.Chain {
		if t.Code == o.pays {
			return status.Classify(o.Res[i].Status) == status.Denied
		}
	}
	return false
}

// NewAttempt makes o a new attempt after the cluster answered it: a
// transfer whose ID TigerBeetle spent (it failed on its own, and a failed
// ID answers id_already_failed for ever) gets a new one. A request with a
// caller's ID whose first transfer (the one that bears the ID) was spent
// goes from then on as the ID's marker followed by every transfer new,
// each carrying the ID in user_data_128. The marker is a transfer of
// nothing whose ID is derived from the request's, linked to the rest:
// created only with it. A later admission under the ID finds the marker
// first and fails whole (TigerBeetle answers exists), so that an ID is
// admitted at most once, while a denial leaves the marker unspent for the
// next attempt.
func (p *Pipeline[U, D]) NewAttempt(o *Op[U, D]) {
	res := o.Res
	o.Reset()
	kept := func(i int) bool {
		return res != nil && (status.Classify(res[i].Status) == status.Admitted || status.Classify(res[i].Status) == status.Linked)
	}
	if o.key != (tb.Uint128{}) && !o.Marked && !kept(0) {
		marker := p.host.Marker(o.key, o.Chain)
		for i := range o.Chain {
			if !kept(i) {
				o.Chain[i].ID = p.host.NewID()
			}
			o.Chain[i].UserData128 = o.key
		}
		o.Chain = slices.Insert(o.Chain, 0, marker)
		for i := range o.Events {
			o.Events[i].I++
		}
		o.Marked = true
		return
	}
	for i := range o.Chain {
		if o.Marked && i == 0 {
			continue // the marker is never spent: it only fails with the rest
		}
		if !kept(i) {
			o.Chain[i].ID = p.host.NewID()
		}
	}
	if first := o.FirstHold(); o.key == (tb.Uint128{}) && first >= 0 {
		// An unnamed request is named by its first hold: the others carry
		// that name, new or not.
		for i := first + 1; i < len(o.Chain); i++ {
			o.Chain[i].UserData128 = o.Chain[first].ID
		}
	}
}
