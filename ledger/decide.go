package ledger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// outcome is what a create result means for a decision. Each boundary
// reads TigerBeetle's statuses in one place: the holds of decisions
// through classify (the pipeline, coalescing, a chain sent again), posts
// and voids of holds through classifyEnd, accounts through
// accountExistsDifferently. Provisioning a limit (provision.go) and
// carrying a hold to a new resource (migrate.go) read the statuses of
// transfers of their own, with their own meanings, where they send them.
type outcome uint8

const (
	outAdmitted   outcome = iota // created, or exists: a retry of an applied attempt
	outDenied                    // too few units (or funds)
	outSpent                     // id_already_failed: an earlier attempt under this ID failed
	outLinked                    // another event of the chain failed
	outNoUser                    // the debit account does not exist
	outNoResource                // the credit account does not exist
	outReusedID                  // the ID was used for a different transfer
	outUnexpected                // anything else: a bug, or a cluster we do not understand
)

// classify turns a transfer's status into what it means for a decision.
// TransferExists does not reach it from the pipeline (package conn folds it
// into TransferCreated, a retry of an applied transfer); it is classified
// all the same, as admitted, for a caller that reads results unfolded.
func classify(s tb.CreateTransferStatus) outcome {
	switch s {
	case tb.TransferCreated, tb.TransferExists:
		return outAdmitted
	case tb.TransferExceedsCredits:
		return outDenied
	case tb.TransferIDAlreadyFailed:
		return outSpent
	case tb.TransferLinkedEventFailed:
		return outLinked
	case tb.TransferDebitAccountNotFound:
		return outNoUser
	case tb.TransferCreditAccountNotFound:
		return outNoResource
	case tb.TransferExistsWithDifferentFlags, tb.TransferExistsWithDifferentPendingID,
		tb.TransferExistsWithDifferentTimeout, tb.TransferExistsWithDifferentDebitAccountID,
		tb.TransferExistsWithDifferentCreditAccountID, tb.TransferExistsWithDifferentAmount,
		tb.TransferExistsWithDifferentUserData128, tb.TransferExistsWithDifferentUserData64,
		tb.TransferExistsWithDifferentUserData32, tb.TransferExistsWithDifferentLedger,
		tb.TransferExistsWithDifferentCode:
		return outReusedID
	}
	return outUnexpected
}

// ending is what the status of a post or void of a hold means.
type ending uint8

const (
	endedNow      ending = iota // created, or exists: this post or void ended the hold
	endExpired                  // the hold expired first: its units are back
	endPostedYet                // another post ended it already
	endVoidedYet                // another void ended it already
	endNoHold                   // there is no such hold
	endUnexpected               // anything else
)

// classifyEnd turns the status of a post or void of a hold into what it
// means: every post and void this package sends (Commit, Cancel, Reset,
// a lease's give-back) is read through it.
func classifyEnd(s tb.CreateTransferStatus) ending {
	switch s {
	case tb.TransferCreated, tb.TransferExists:
		return endedNow
	case tb.TransferPendingTransferExpired:
		return endExpired
	case tb.TransferPendingTransferAlreadyPosted:
		return endPostedYet
	case tb.TransferPendingTransferAlreadyVoided:
		return endVoidedYet
	case tb.TransferPendingTransferNotFound:
		return endNoHold
	}
	return endUnexpected
}

// decision returns the results of o's deciding chain: the linked chain
// that holds the units the caller asked for (an op may also carry a chain
// that ends an earlier hold, a lease's).
func (o *op) decision() []tb.CreateTransferResult {
	start := o.decisionStart()
	if start < 0 || o.res == nil {
		return nil
	}
	end := start
	for end < len(o.chain)-1 && o.chain[end].TransferFlags().Linked {
		end++
	}
	return o.res[start : end+1]
}

// decisionStart is the index in o's chain where its deciding chain starts,
// or -1 if it has none.
func (o *op) decisionStart() int {
	start := o.first()
	for start > 0 && o.chain[start-1].TransferFlags().Linked {
		start--
	}
	return start
}

// first is the index in o's chain of its first deciding hold, or -1.
func (o *op) first() int {
	for _, e := range o.events {
		if e.decide {
			return e.i
		}
	}
	return -1
}

// name is what names o's request: its caller's ID, else the ID of its
// first hold.
func (o *op) name() ID {
	if !o.key.IsZero() {
		return o.key
	}
	return fromTB(o.chain[o.first()].ID)
}

// chainOutcome reports whether a chain's results say it failed, and
// whether they decide it: every event admitted, denied, or failed with it.
// A chain that failed although one of its events was created existed
// already (TigerBeetle answers exists, which fails the rest of the chain):
// earlier says so, and it counts as admitted.
func chainOutcome(res []tb.CreateTransferResult) (failed, decided, earlier bool) {
	decided = true
	created := false
	for _, s := range res {
		switch classify(s.Status) {
		case outAdmitted:
			created = true
		case outDenied, outLinked:
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

// decide sends o, a chain of holds of holds' users, through the pipeline
// and returns one Decision per hold. It is the one step every decision
// path takes: a merged transfer the cluster refused is sent again alone; a
// request whose ID was spent by an earlier attempt is sent again as a new
// attempt under that ID (see again); a user of a lazy resource found missing
// is provisioned and the chain sent again (once); an unanswered call goes
// to the Client's OnUnavailable.
func (c *Client) decide(ctx context.Context, o *op, holds []Hold) ([]Decision, error) {
	for provisioned, recredited, attempts := false, false, 0; ; attempts++ {
		if err := c.submit(ctx, o); err != nil {
			return c.unavailableDecisions(o, err)
		}
		switch {
		case o.retry:
			o.reset()
			o.merge = false
			continue
		case o.ds != nil:
			if !recredited && !o.ds[0].Allowed && o.ds[0].Reason == LimitExceeded {
				uncredited, err := c.uncredited(ctx, o, holds)
				if err != nil {
					return nil, err
				}
				if len(uncredited) > 0 {
					// Being provisioned elsewhere (or left half-made by a
					// crash): finish it, idempotently, and decide again.
					if err := c.provisionLazy(ctx, holds, uncredited); err != nil {
						return nil, err
					}
					recredited = true
					if err := c.again(ctx, o); err != nil {
						return nil, err
					}
					continue
				}
			}
			return o.ds, c.exactRetryAfter(ctx, o)
		case spent(o.decision()) && attempts < maxAttempts:
			if err := c.again(ctx, o); err != nil {
				return nil, err
			}
			continue
		}
		lazy, err := c.failure(ctx, o, holds)
		if err != nil {
			return nil, err
		}
		if provisioned {
			return nil, c.missing(ctx, holds[lazy[0]].Resource, holds[lazy[0]].Request.User)
		}
		if err := c.provisionLazy(ctx, holds, lazy); err != nil {
			return nil, err
		}
		provisioned = true
		if err := c.again(ctx, o); err != nil {
			return nil, err
		}
	}
}

// again makes o a new attempt (see op.again), with the marker accounts of
// its ledger in place if it now carries a marker.
func (c *Client) again(ctx context.Context, o *op) error {
	o.again()
	if o.marked {
		return c.ensureMarkers(ctx, o.chain[0].Ledger)
	}
	return nil
}

// maxAttempts bounds the attempts of one call. An attempt is made again
// when its ID was spent: by an earlier call under the request's ID (once),
// or by its own earlier delivery (a request the network delivered twice);
// every attempt is safe, since the ID's marker admits at most one.
const maxAttempts = 8

// spent reports whether a result says that an earlier attempt under the
// same ID failed (TigerBeetle keeps failed IDs for ever).
func spent(res []tb.CreateTransferResult) bool {
	for _, s := range res {
		if classify(s.Status) == outSpent {
			return true
		}
	}
	return false
}

// markerAccounts are the two accounts of a ledger between which its key
// markers move nothing. They belong to no user, so that a marker can only
// fail with the rest of its chain, never on its own (which would spend its
// ID for ever).
func markerAccounts(ledger uint32) (ID, ID) {
	return derive(roleMarkerAccount, ledger, "a"), derive(roleMarkerAccount, ledger, "b")
}

// markerAccountsOf returns the accounts to create for the markers of a
// ledger.
func markerAccountsOf(ledger uint32) []tb.Account {
	a, b := markerAccounts(ledger)
	return []tb.Account{
		{ID: a.tb(), Ledger: ledger, Code: codeMarkers},
		{ID: b.tb(), Ledger: ledger, Code: codeMarkers},
	}
}

// ensureMarkers makes sure that ledger's marker accounts exist before a
// marker is sent on it: CreateResource creates them, but a resource created
// by an older version has none. Once per ledger and Client.
func (c *Client) ensureMarkers(ctx context.Context, ledger uint32) error {
	if _, ok := c.markers.Load(ledger); ok {
		return nil
	}
	res, err := c.conn.CreateAccounts(ctx, markerAccountsOf(ledger))
	if err != nil {
		return err
	}
	for i, s := range res {
		if s.Status != tb.AccountCreated && s.Status != tb.AccountExists {
			return fmt.Errorf("ledger: marker accounts of ledger %d: %w", ledger, accountStatusError(i, s.Status))
		}
	}
	c.markers.Store(ledger, true)
	return nil
}

// again makes o a new attempt after the cluster answered it: a transfer
// whose ID TigerBeetle spent (it failed on its own, and a failed ID answers
// id_already_failed for ever) gets a new one. A request with a caller's ID
// whose first transfer (the one that bears the ID) was spent goes from then
// on as the ID's marker followed by every transfer new, each carrying the
// ID in user_data_128. The marker is a transfer of nothing whose ID is
// derived from the request's, linked to the rest: created only with it.
// A later admission under the ID finds the marker first and fails whole
// (TigerBeetle answers exists), so that an ID is admitted at most once,
// while a denial leaves the marker unspent for the next attempt.
func (o *op) again() {
	res := o.res
	o.reset()
	kept := func(i int) bool {
		return res != nil && (classify(res[i].Status) == outAdmitted || classify(res[i].Status) == outLinked)
	}
	if !o.key.IsZero() && !o.marked && !kept(0) {
		marker := keyMarker(o.key, o.chain)
		for i := range o.chain {
			if !kept(i) {
				o.chain[i].ID = NewID().tb()
			}
			o.chain[i].UserData128 = o.key.tb()
		}
		o.chain = slices.Insert(o.chain, 0, marker)
		for i := range o.events {
			o.events[i].i++
		}
		o.marked = true
		return
	}
	for i := range o.chain {
		if o.marked && i == 0 {
			continue // the marker is never spent: it only fails with the rest
		}
		if !kept(i) {
			o.chain[i].ID = NewID().tb()
		}
	}
	if first := o.first(); o.key.IsZero() && first >= 0 {
		// An unnamed request is named by its first hold: the others carry
		// that name, new or not.
		for i := first + 1; i < len(o.chain); i++ {
			o.chain[i].UserData128 = o.chain[first].ID
		}
	}
}

// keyMarker is the marker of a request with ID key whose transfers are
// chain: nothing moves between the first's accounts, on its ledger; the
// first's amount is kept in user_data_64, and what the request is in
// user_data_128, so that the ID used again for a different request is
// refused.
func keyMarker(key ID, chain []tb.Transfer) tb.Transfer {
	first := chain[0]
	amount, _ := u64(first.Amount)
	a, b := markerAccounts(first.Ledger)
	// What the request is: an ID used again for another (other accounts,
	// another amount, another payee) finds the marker with other user
	// data. A single hold is named by its accounts, as markers always
	// were; a chain also by the accounts, amount and ledger of every
	// later transfer (a payment's payee).
	what := make([]byte, 48, 48+52*(len(chain)-1))
	copy(what[:16], key[:])
	debit, credit := first.DebitAccountID.Bytes(), first.CreditAccountID.Bytes()
	copy(what[16:32], debit[:])
	copy(what[32:], credit[:])
	for _, t := range chain[1:] {
		debit, credit, amount := t.DebitAccountID.Bytes(), t.CreditAccountID.Bytes(), t.Amount.Bytes()
		what = append(what, debit[:]...)
		what = append(what, credit[:]...)
		what = append(what, amount[:]...)
		what = binary.LittleEndian.AppendUint32(what, t.Ledger)
	}
	return tb.Transfer{
		ID:              derive(roleKeyMarker, 0, string(key[:])).tb(),
		DebitAccountID:  a.tb(),
		CreditAccountID: b.tb(),
		UserData128:     derive(roleKeyRequest, 0, string(what[:])).tb(),
		UserData64:      amount,
		Ledger:          first.Ledger,
		Code:            codeKeyMarker,
		Flags:           tb.TransferFlags{Linked: true}.ToUint16(),
	}
}

// reset clears o's answer, to send it again.
func (o *op) reset() {
	o.res, o.ds, o.shared, o.retry, o.local, o.err = nil, nil, tb.Uint128{}, false, false, nil
}

// failure explains why o's deciding chain failed for a reason other than
// a limit. It returns the holds whose users are missing on a lazy resource
// (to be provisioned), or the error to return.
func (c *Client) failure(ctx context.Context, o *op, holds []Hold) (lazy []int, err error) {
	res, start := o.decision(), o.decisionStart()
	for i, s := range res {
		out := classify(s.Status)
		if o.explain != nil {
			if err := o.explain(&o.chain[start+i], out); err != nil {
				return nil, err
			}
		}
		switch out {
		case outReusedID:
			return nil, fmt.Errorf("%w: %s (%s)", ErrIDReused, o.name(), s.Status)
		case outUnexpected:
			return nil, transferStatusError(i, s.Status)
		}
	}
	for k, e := range o.deciding() {
		h := holds[k]
		switch classify(o.res[e.i].Status) {
		case outNoUser:
			if !h.Resource.Lazy {
				return nil, c.missing(ctx, h.Resource, h.Request.User)
			}
			lazy = append(lazy, k)
		case outNoResource:
			return nil, fmt.Errorf("%w: no resource on ledger %d", ErrUnknownResource, h.Resource.Ledger)
		case outLinked:
			// A later hold of the chain was not reached: its user may be
			// missing too. Provisioning it again is harmless.
			e.u.lock()
			known := e.u.v.limitKnown
			e.u.mu.Unlock()
			if h.Resource.Lazy && !known {
				lazy = append(lazy, k)
			}
		}
	}
	if len(lazy) == 0 || !anyNoUser(res) {
		return nil, fmt.Errorf("ledger: chain failed without a cause: %v", res)
	}
	return lazy, nil
}

func anyNoUser(res []tb.CreateTransferResult) bool {
	for _, s := range res {
		if classify(s.Status) == outNoUser {
			return true
		}
	}
	return false
}

// provisionLazy provisions the users of the lazy holds listed in idx with
// their resource's default limit.
func (c *Client) provisionLazy(ctx context.Context, holds []Hold, idx []int) error {
	for _, i := range idx {
		h := holds[i]
		limit := h.Resource.DefaultLimit
		if h.Request.Limit != 0 {
			limit = h.Request.Limit
		}
		if err := c.provision(ctx, h.Resource, []UserLimit{{Key: h.Request.User, Limit: limit}}, false); err != nil {
			return err
		}
	}
	return nil
}

// uncredited returns the holds of a denied chain that came to their
// user's account before its limit did: the account of a lazy user is
// created, then credited (two requests), and a hold of another caller or
// process that lands between the two is refused for want of credits that
// were on their way. Such a denial is no denial: the caller provisions
// (idempotently) and decides again. It is told by the user's provisioning
// transfer, missing or stamped after the hold. Only users whose limit this
// Client does not know are looked at: after their first decisions, never.
func (c *Client) uncredited(ctx context.Context, o *op, holds []Hold) ([]int, error) {
	var idx, out []int
	var ids []tb.Uint128
	var at []uint64
	for k, e := range o.deciding() {
		h := holds[k]
		if !h.Resource.Lazy || e.i >= len(o.res) || classify(o.res[e.i].Status) != outDenied {
			continue // a merged op has no result of its own (see coalesce)
		}
		held := o.res[e.i].Timestamp
		e.u.mu.Lock()
		known, credited := e.u.v.limitKnown, e.u.creditedAt()
		e.u.mu.Unlock()
		switch {
		case credited > held:
			out = append(out, k) // this Client credited it, after the hold came
		case !known:
			idx = append(idx, k)
			ids = append(ids, derive(roleProvision, h.Resource.Ledger, h.Request.User).tb())
			at = append(at, held)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	ts, err := c.conn.LookupTransfers(ctx, ids)
	if err != nil {
		return nil, err
	}
	credited := map[tb.Uint128]uint64{}
	for _, t := range ts {
		credited[t.ID] = t.Timestamp
	}
	for j, i := range idx {
		if when, ok := credited[ids[j]]; !ok || when > at[j] {
			out = append(out, i)
		}
	}
	return out, nil
}

// missing explains why user key has no account on r: there is no such
// resource, or no such user.
func (c *Client) missing(ctx context.Context, r Resource, key string) error {
	if _, err := c.Resource(ctx, r.Ledger); err != nil {
		return err
	}
	return &UnknownUserError{Resource: r, User: key}
}

// unavailableDecisions applies the Client's OnUnavailable to o, whose answer did
// not come: one Decision per deciding hold, and the error to return.
func (c *Client) unavailableDecisions(o *op, err error) ([]Decision, error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	// A call that coalescing may have merged into a transfer shared with
	// others has no name of its own to be retried by.
	var name ID
	if !(o.merge && c.coalesce) {
		name = o.name()
	}
	var ds []Decision
	for _, e := range o.events {
		if e.decide {
			ds = append(ds, c.unanswered(name))
		}
	}
	if c.unavailable == ReturnError || o.payment {
		for i := range ds {
			ds[i].Allowed = false // a payment is never made open
		}
		if name.IsZero() {
			return ds, err
		}
		return ds, &attemptError{id: name, err: err}
	}
	return ds, nil
}

// unanswered is the Decision for a call the cluster did not answer (id:
// the attempt's name, zero if it has none): what the Client's OnUnavailable
// makes of it.
func (c *Client) unanswered(id ID) Decision {
	return Decision{Allowed: c.unavailable == FailOpen, Reason: Unavailable, ID: id}
}

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
// decisions are appended to ds.
func (c *Client) denyLocally(holds []Hold, us []*user, ds []Decision) ([]Decision, bool) {
	if len(holds) == 1 {
		if d, ok := c.denyPublished(us[0], holds[0].Request.Amount, false, holds[0].Request.Limit); ok {
			return append(ds, d), true
		}
	}
	now, t := c.nows()
	deny := -1
	var denial Decision // described under the lock that decided it
	for i := range holds {
		amount := holds[i].Request.Amount
		us[i].mu.Lock() // not lock: a denial changes nothing
		ok := us[i].v.deny(amount, t, now)
		if ok {
			denial = localDenial(&us[i].v, amount, t)
			if len(holds) == 1 {
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
		return nil, false
	}
	for i := range holds {
		if i == deny {
			ds = append(ds, denial)
			continue
		}
		us[i].mu.Lock()
		d := us[i].v.verdict(holds[i].Request.Amount, t)
		us[i].mu.Unlock()
		ds = append(ds, d)
	}
	c.localDenials.add(1)
	return ds, true
}
