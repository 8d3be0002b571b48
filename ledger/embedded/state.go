package embedded

import (
	"cmp"
	"math"
	"slices"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/internal/u128"
)

// batchMax is the most events one request may carry, and the most results a
// query may ask for, with TigerBeetle 0.17's default message size.
const batchMax = 8189

// Account flags (tb.AccountFlags).
const (
	afLinked                     = 1 << 0
	afDebitsMustNotExceedCredits = 1 << 1
	afCreditsMustNotExceedDebits = 1 << 2
	afHistory                    = 1 << 3
	afImported                   = 1 << 4
	afClosed                     = 1 << 5
	afPadding                    = ^uint16(1<<6 - 1)
)

// Transfer flags (tb.TransferFlags).
const (
	tfLinked        = 1 << 0
	tfPending       = 1 << 1
	tfPost          = 1 << 2
	tfVoid          = 1 << 3
	tfBalancingDr   = 1 << 4
	tfBalancingCr   = 1 << 5
	tfClosingDr     = 1 << 6
	tfClosingCr     = 1 << 7
	tfImported      = 1 << 8
	tfPadding       = ^uint16(1<<9 - 1)
	tfPostOrVoid    = tfPost | tfVoid
	tfClosing       = tfClosingDr | tfClosingCr
	tfUserFlagsMask = 1<<9 - 1
)

// The lifecycle of a pending transfer, kept in the top bits of xfer.flags
// (bits TigerBeetle requires to be zero in every stored transfer).
const (
	stateShift   = 13
	stateNone    = 0 // not a pending transfer
	statePending = 1
	statePosted  = 2
	stateVoided  = 3
	stateExpired = 4
)

// Cluster timestamps lie in [timestampMin, timestampMax]. TigerBeetle
// 0.17.9 keeps the top bit of its u64 timestamps for the LSM's tombstones, so
// its largest timestamp is 2^63 - 1 (TimestampRange in src/lsm/
// timestamp_range.zig): imported events, filters and the cluster clock are
// all checked against it.
const (
	timestampMin = 1
	timestampMax = math.MaxInt64
)

// validTimestamp reports whether ts is one TigerBeetle could issue.
func validTimestamp(ts uint64) bool { return ts >= timestampMin && ts <= timestampMax }

// xfer is one stored transfer: 56 bytes, plus 16 for its ID in the idSet
// and 16 for a user data 128 that is not zero (see xferArena). Ledger,
// account IDs and pending ID are recovered through the indexes.
type xfer struct {
	amount  u128.Uint
	ud64    uint64
	ts      uint64
	dr, cr  uint32 // account indexes
	ud32    uint32
	timeout uint32
	pending uint32 // arena index of the pending transfer (post/void only)
	code    uint16
	flags   uint16 // transfer flags | pending state << stateShift
}

func (x *xfer) state() uint16 { return x.flags >> stateShift }

func (x *xfer) setState(s uint16) { x.flags = x.flags&tfUserFlagsMask | s<<stateShift }

// expiresAt is when a pending transfer with a timeout expires.
func (x *xfer) expiresAt() uint64 { return x.ts + uint64(x.timeout)*1e9 }

type balances struct{ dPend, dPost, cPend, cPost u128.Uint }

// balance is one get_account_balances entry: the account's balances right
// after transfer xfer.
type balance struct {
	xfer uint32
	balances
}

type acct struct {
	balances
	id     tb.Uint128
	ud128  tb.Uint128
	ud64   uint64
	ts     uint64
	ud32   uint32
	ledger uint32
	code   uint16
	flags  uint16
	flags0 uint16 // the flags it was created with

	// Arena indexes of the transfers this account is the debit / credit
	// account of, ascending (= timestamp order).
	debits, credits idxList
	// expired holds the indexes in state.expired of the expiries of its
	// pending transfers, ascending.
	expired idxList
	// ckpts holds every ckptEvery-th snapshot of its change events.
	ckpts dlist[ckpt]
	// history holds one entry per transfer, only with flags.history.
	history dlist[balance]
}

func (a *acct) debitsExceedCredits(amount u128.Uint) bool {
	if a.flags&afDebitsMustNotExceedCredits == 0 {
		return false
	}
	// No overflow: the overflow checks ran first.
	d, _ := a.dPend.Add(a.dPost)
	d, _ = d.Add(amount)
	return a.cPost.Cmp(d) < 0
}

func (a *acct) creditsExceedDebits(amount u128.Uint) bool {
	if a.flags&afCreditsMustNotExceedDebits == 0 {
		return false
	}
	c, _ := a.cPend.Add(a.cPost)
	c, _ = c.Add(amount)
	return a.dPost.Cmp(c) < 0
}

// undo is one step of a linked chain's rollback log.
type undo struct {
	kind  uint8
	flags uint16
	state uint16
	idx   uint32
	bal   balances
}

const (
	undoAccount    = iota // restore the balances and flags of account idx
	undoState             // restore the pending state of transfer idx
	undoTransfer          // remove the last stored transfer
	undoAccountNew        // remove the last created account
)

// state is TigerBeetle's state machine. It is deterministic: the same
// requests applied with the same timestamps give the same state and results.
// It is not safe for concurrent use; Engine serializes access.
type state struct {
	accounts   acctArena // with a store, in pages read back when used
	accountIdx table     // in memory, with or without a store: see findAccount

	transferIDs ids       // index i is the ID of transfers.at(i)
	transfers   xferArena // in timestamp order
	failedIDs   ids       // IDs of transfers that failed with a transient status

	// st, when not nil, keeps the state on disk: see store.go.
	st *store

	// Pending transfers with a timeout wait for their expiry in the queue of
	// their timeout (most of them), or in the heap once maxQueues timeouts
	// have queues. nextExpiry is at most the earliest expiry of them all.
	queues     []expiryQueue
	expiries   expiryHeap
	nextExpiry uint64

	pendingCount uint64 // transfers in statePending
	expiredCount uint64
	due          []expiry // pending transfers being expired (scratch)

	// expired is the log of expiries, in timestamp order; lastEvent is the
	// greatest timestamp given to an event (account, transfer, expiry) or
	// taken by a create request.
	expired   chunked[expiredEvent]
	lastEvent uint64

	chain    bool   // inside a linked chain: record undo steps
	undoLog  []undo // the current chain's changes
	chainPre uint64 // pendingCount at the start of the chain

	hashes  []uint64 // the hashes of the IDs of the current request's transfers
	touched uint64   // keeps the reads of touchSlots
	hotDr   acctRef  // the debit account last found by the current create_transfers
	hotCr   acctRef  // the credit account last found by the current create_transfers
}

// acctRef caches the index of an account for one create_transfers request
// (accounts are neither created nor removed during one). The zero ID, which
// no account has, marks an empty entry.
type acctRef struct {
	id  tb.Uint128
	idx uint32
}

// maxQueues bounds the expiry queues; transfers with other timeouts go to
// the heap. A limiter has a timeout per window length: a handful.
const maxQueues = 16

func newState() *state {
	return &state{nextExpiry: ^uint64(0)}
}

// lastTransferTimestamp is the greatest timestamp of a stored transfer.
func (s *state) lastTransferTimestamp() uint64 {
	if s.transfers.n == 0 {
		return 0
	}
	return s.transfers.at(s.transfers.n - 1).ts
}

func (s *state) lastAccountTimestamp() uint64 {
	if s.accounts.n == 0 {
		return 0
	}
	return s.accounts.at(s.accounts.n - 1).ts
}

// transferAt reports whether a stored transfer has timestamp ts.
func (s *state) transferAt(ts uint64) bool {
	lo, hi := uint32(0), s.transfers.n
	for lo < hi {
		m := lo + (hi-lo)/2
		t := s.transfers.at(m).ts
		switch {
		case t == ts:
			return true
		case t < ts:
			lo = m + 1
		default:
			hi = m
		}
	}
	return false
}

// accountAt reports whether an account has timestamp ts.
func (s *state) accountAt(ts uint64) bool {
	lo, hi := 0, int(s.accounts.n)
	for lo < hi {
		m := lo + (hi-lo)/2
		t := s.accounts.at(uint32(m)).ts
		switch {
		case t == ts:
			return true
		case t < ts:
			lo = m + 1
		default:
			hi = m
		}
	}
	return false
}

// expire releases every pending transfer that expires at or before now.
// Expiry depends on time alone, so releasing early (on a read) or late (on
// the next create) gives the same state at any later request; the expiries
// are applied and stamped in the order of their instants, then of their
// arena indexes (see changes.go), which gives the same stamps too.
func (s *state) expire(now uint64) {
	if now < s.nextExpiry {
		return
	}
	// Each timeout's queue and the heap yield their due transfers in that
	// order; with more than one of them, the whole lot is sorted.
	due := s.due[:0]
	sorted := true
	take := func(at uint64, idx uint32) {
		if n := len(due); n > 0 && (at < due[n-1].at || at == due[n-1].at && idx < due[n-1].idx) {
			sorted = false
		}
		due = append(due, expiry{at: at, idx: idx})
		s.transfers.setState(idx, stateExpired)
	}
	next := ^uint64(0)
	for k := range s.queues {
		q := &s.queues[k]
		for q.n > 0 {
			p := s.transfers.at(q.front())
			if at := p.expiresAt(); at > now {
				next = min(next, at)
				break
			}
			if p.state() == statePending {
				take(p.expiresAt(), q.front())
			}
			q.popFront()
		}
	}
	for len(s.expiries) > 0 && s.expiries[0].at <= now {
		e := s.expiries.pop()
		if e.idx >= s.transfers.n {
			continue // rolled back
		}
		p := s.transfers.at(e.idx)
		if p.state() != statePending || p.timeout == 0 || p.expiresAt() != e.at {
			continue // posted, voided, taken already, or the index was reused
		}
		take(e.at, e.idx)
	}
	if len(s.expiries) > 0 {
		next = min(next, s.expiries[0].at)
	}
	s.nextExpiry = next
	if !sorted {
		slices.SortFunc(due, func(a, b expiry) int {
			return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.idx, b.idx))
		})
	}
	for _, d := range due {
		s.expireOne(d.idx)
	}
	s.due = due[:0]
}

// schedule arranges for the pending transfer x, stored at idx with a
// timeout, to expire.
func (s *state) schedule(idx uint32, x *xfer) {
	at := x.expiresAt()
	s.nextExpiry = min(s.nextExpiry, at)
	if q := s.queue(x.timeout); q != nil && (q.n == 0 || s.transfers.at(q.back()).expiresAt() <= at) {
		q.push(idx)
		return
	}
	s.expiries.push(expiry{at: at, idx: idx})
}

// queue returns the expiry queue of a timeout, making one if there is room,
// or nil.
func (s *state) queue(timeout uint32) *expiryQueue {
	for k := range s.queues {
		if s.queues[k].timeout == timeout {
			return &s.queues[k]
		}
	}
	if len(s.queues) < maxQueues {
		s.queues = append(s.queues, expiryQueue{timeout: timeout})
		return &s.queues[len(s.queues)-1]
	}
	for k := range s.queues {
		if q := &s.queues[k]; q.n == 0 {
			q.timeout = timeout
			return q
		}
	}
	return nil
}

// unschedule takes the newest transfer, at idx, out of its expiry queue
// when it is there (rollback). Heap entries are dropped lazily instead.
func (s *state) unschedule(idx uint32, x *xfer) {
	for k := range s.queues {
		if q := &s.queues[k]; q.timeout == x.timeout {
			if q.n > 0 && q.back() == idx {
				q.popBack()
			}
			return
		}
	}
}

func (s *state) beginChain() {
	s.chain = true
	s.undoLog = s.undoLog[:0]
	s.chainPre = s.pendingCount
}

func (s *state) endChain() {
	s.chain = false
	s.undoLog = s.undoLog[:0]
}

// rollback undoes every change of the current chain, newest first.
func (s *state) rollback() {
	for i := len(s.undoLog) - 1; i >= 0; i-- {
		u := &s.undoLog[i]
		switch u.kind {
		case undoAccount:
			a := s.accounts.at(u.idx)
			a.balances = u.bal
			a.flags = u.flags
		case undoState:
			s.transfers.setState(u.idx, u.state)
		case undoTransfer:
			s.removeLastTransfer()
		case undoAccountNew:
			ai := s.accounts.n - 1
			s.accountIdx.remove(hashID(s.accounts.at(ai).id), ai)
			s.accounts.pop()
		}
	}
	s.pendingCount = s.chainPre
	s.undoLog = s.undoLog[:0]
}

func (s *state) saveAccount(i uint32) {
	a := s.accounts.at(i)
	s.undoLog = append(s.undoLog, undo{kind: undoAccount, idx: i, bal: a.balances, flags: a.flags})
}

func (s *state) removeLastTransfer() {
	i := s.transfers.n - 1
	x := s.transfers.at(i)
	dr, cr := s.accounts.at(x.dr), s.accounts.at(x.cr)
	dr.debits.pop()
	cr.credits.pop()
	dr.dropCkpts()
	cr.dropCkpts()
	if n := dr.history.len(); n > 0 && dr.history.at(n-1).xfer == i {
		dr.history.truncate(n - 1)
	}
	if n := cr.history.len(); n > 0 && cr.history.at(n-1).xfer == i {
		cr.history.truncate(n - 1)
	}
	if x.flags&tfPending != 0 && x.timeout != 0 {
		s.unschedule(i, x)
	}
	s.transferIDs.removeLast()
	s.transfers.pop()
}

// open prepares a create request stamped at base: it releases the pending
// transfers due by the request's first timestamp and returns the base of
// the request's own timestamps. Those come after the timestamps the
// expiries took, which may make more transfers due by the first one.
// close records that the request took n timestamps.
func (s *state) open(base uint64) uint64 {
	for {
		s.expire(base + 1)
		if s.lastEvent <= base {
			return base
		}
		base = s.lastEvent
	}
}

func (s *state) close(base uint64, n int) {
	if n > 0 {
		s.lastEvent = base + uint64(n)
	}
}

// createAccount validates and stores one account. eventTs is the account's
// timestamp, ts the event's validation timestamp.
func (s *state) createAccount(a *tb.Account, eventTs, ts uint64) (tb.CreateAccountStatus, uint64) {
	if a.Reserved != 0 {
		return tb.AccountReservedField, ts
	}
	if a.Flags&afPadding != 0 {
		return tb.AccountReservedFlag, ts
	}
	if a.ID == tbZero {
		return tb.AccountIDMustNotBeZero, ts
	}
	if a.ID == tbMaxInt {
		return tb.AccountIDMustNotBeIntMax, ts
	}
	if i, ok := s.findAccount(a.ID); ok {
		e := s.accounts.at(i)
		switch {
		case a.Flags != e.flags:
			return tb.AccountExistsWithDifferentFlags, ts
		case a.UserData128 != e.ud128:
			return tb.AccountExistsWithDifferentUserData128, ts
		case a.UserData64 != e.ud64:
			return tb.AccountExistsWithDifferentUserData64, ts
		case a.UserData32 != e.ud32:
			return tb.AccountExistsWithDifferentUserData32, ts
		case a.Ledger != e.ledger:
			return tb.AccountExistsWithDifferentLedger, ts
		case a.Code != e.code:
			return tb.AccountExistsWithDifferentCode, ts
		}
		return tb.AccountExists, e.ts
	}
	if a.Flags&afDebitsMustNotExceedCredits != 0 && a.Flags&afCreditsMustNotExceedDebits != 0 {
		return tb.AccountFlagsAreMutuallyExclusive, ts
	}
	switch {
	case a.DebitsPending != tbZero:
		return tb.AccountDebitsPendingMustBeZero, ts
	case a.DebitsPosted != tbZero:
		return tb.AccountDebitsPostedMustBeZero, ts
	case a.CreditsPending != tbZero:
		return tb.AccountCreditsPendingMustBeZero, ts
	case a.CreditsPosted != tbZero:
		return tb.AccountCreditsPostedMustBeZero, ts
	case a.Ledger == 0:
		return tb.AccountLedgerMustNotBeZero, ts
	case a.Code == 0:
		return tb.AccountCodeMustNotBeZero, ts
	}
	if a.Flags&afImported != 0 {
		if eventTs <= s.lastAccountTimestamp() || s.transferAt(eventTs) {
			return tb.AccountImportedEventTimestampMustNotRegress, ts
		}
	}
	ai, na := s.accounts.push()
	s.accountIdx.put(hashID(a.ID), ai)
	*na = acct{
		id:     a.ID,
		ud128:  a.UserData128,
		ud64:   a.UserData64,
		ud32:   a.UserData32,
		ledger: a.Ledger,
		code:   a.Code,
		flags:  a.Flags,
		flags0: a.Flags,
		ts:     eventTs,
	}
	if s.chain {
		s.undoLog = append(s.undoLog, undo{kind: undoAccountNew})
	}
	if s.st != nil {
		s.st.touchAccount(ai)
	}
	return tb.AccountCreated, eventTs
}

// transient reports the statuses after which the transfer's ID can never be
// used again: they depend on the state at the time, so a retry could
// otherwise succeed and break the exactly-once guarantee.
func transient(status tb.CreateTransferStatus) bool {
	switch status {
	case tb.TransferDebitAccountNotFound,
		tb.TransferCreditAccountNotFound,
		tb.TransferPendingTransferNotFound,
		tb.TransferExceedsCredits,
		tb.TransferExceedsDebits,
		tb.TransferDebitAccountAlreadyClosed,
		tb.TransferCreditAccountAlreadyClosed:
		return true
	}
	return false
}

// hashIDs returns the hashes of the transfers' IDs.
func (s *state) hashIDs(events []tb.Transfer) []uint64 {
	if cap(s.hashes) < len(events) {
		s.hashes = make([]uint64, len(events))
	}
	hs := s.hashes[:len(events)]
	for i := range events {
		hs[i] = hashID(events[i].ID)
	}
	return hs
}

// touchBlock is how many events touchSlots prepares at a time: enough to
// overlap many cache misses, few enough that their cache lines and pages
// stay cached until used.
const touchBlock = 64

// touchSlots reads the slots where looking up the IDs with hashes hs will
// start. Those reads are independent of each other, so the CPU waits for
// their cache misses all at once rather than one event after the other.
func (s *state) touchSlots(hs []uint64) {
	sum := s.touched
	for _, h := range hs {
		sum += s.transferIDs.touch(h) + s.failedIDs.touch(h)
	}
	s.touched = sum
}

// findAccount returns the index of the account with ID id. The index of
// accounts is a table without IDs of its own: the accounts hold them, so a
// slot whose 32 bits of hash match is checked against its account's ID. A
// lookup of an account that exists reads nothing the account's use does
// not read next (its page, read back from the store if it is not in
// memory); one of a new ID reads an account only when another ID's bits
// match (measured: one lookup in 4,000 with a million accounts, since the
// bits that place an ID in the table are the first of the 32). The index
// of every account, the one thing the engine keeps in memory for every key
// however long ago it was used, then takes 11 to 21 bytes a key where a
// map took about 37.
func (s *state) findAccount(id tb.Uint128) (uint32, bool) {
	return s.accountIdx.find(id, hashID(id), func(i uint32) tb.Uint128 { return s.accounts.at(i).id })
}

// accountIndex returns the index of the account with ID id, which must not
// be zero, remembering it in *hot: a batch of decisions credits one
// operator and often debits one hot user.
func (s *state) accountIndex(id tb.Uint128, hot *acctRef) (uint32, bool) {
	if id == hot.id {
		return hot.idx, true
	}
	i, ok := s.findAccount(id)
	if ok {
		*hot = acctRef{id: id, idx: i}
	}
	return i, ok
}

// createTransfer validates and applies one transfer. eventTs is the
// transfer's timestamp, ts the event's validation timestamp, h the hash of
// its ID.
func (s *state) createTransfer(t *tb.Transfer, eventTs, ts, h uint64) (tb.CreateTransferStatus, uint64) {
	if t.Flags&tfPadding != 0 {
		return tb.TransferReservedFlag, ts
	}
	if t.ID == tbZero {
		return tb.TransferIDMustNotBeZero, ts
	}
	if t.ID == tbMaxInt {
		return tb.TransferIDMustNotBeIntMax, ts
	}
	if i, ok := s.transferIDs.findHashed(t.ID, h); ok {
		status := s.transferExists(t, i)
		if status == tb.TransferExists {
			return status, s.transfers.at(i).ts
		}
		return status, ts
	}
	if _, ok := s.failedIDs.findHashed(t.ID, h); ok {
		return tb.TransferIDAlreadyFailed, ts
	}
	var status tb.CreateTransferStatus
	if t.Flags&tfPostOrVoid != 0 {
		status = s.postOrVoid(t, eventTs, h)
	} else {
		status = s.createPlain(t, eventTs, h)
	}
	if status == tb.TransferCreated {
		return status, eventTs
	}
	return status, ts
}

// createPlain creates a transfer that is neither a post nor a void; h is
// the hash of its ID.
func (s *state) createPlain(t *tb.Transfer, eventTs, h uint64) tb.CreateTransferStatus {
	switch {
	case t.DebitAccountID == tbZero:
		return tb.TransferDebitAccountIDMustNotBeZero
	case t.DebitAccountID == tbMaxInt:
		return tb.TransferDebitAccountIDMustNotBeIntMax
	case t.CreditAccountID == tbZero:
		return tb.TransferCreditAccountIDMustNotBeZero
	case t.CreditAccountID == tbMaxInt:
		return tb.TransferCreditAccountIDMustNotBeIntMax
	case t.DebitAccountID == t.CreditAccountID:
		return tb.TransferAccountsMustBeDifferent
	case t.PendingID != tbZero:
		return tb.TransferPendingIDMustBeZero
	}
	pending := t.Flags&tfPending != 0
	if !pending {
		if t.Timeout != 0 {
			return tb.TransferTimeoutReservedForPendingTransfer
		}
		if t.Flags&tfClosing != 0 {
			return tb.TransferClosingTransferMustBePending
		}
	}
	if t.Ledger == 0 {
		return tb.TransferLedgerMustNotBeZero
	}
	if t.Code == 0 {
		return tb.TransferCodeMustNotBeZero
	}
	di, ok := s.accountIndex(t.DebitAccountID, &s.hotDr)
	if !ok {
		return tb.TransferDebitAccountNotFound
	}
	ci, ok := s.accountIndex(t.CreditAccountID, &s.hotCr)
	if !ok {
		return tb.TransferCreditAccountNotFound
	}
	dr, cr := s.accounts.at(di), s.accounts.at(ci)
	if dr.ledger != cr.ledger {
		return tb.TransferAccountsMustHaveTheSameLedger
	}
	if t.Ledger != dr.ledger {
		return tb.TransferTransferMustHaveTheSameLedgerAsAccounts
	}
	if t.Flags&tfImported != 0 {
		if eventTs <= s.lastTransferTimestamp() || s.accountAt(eventTs) {
			return tb.TransferImportedEventTimestampMustNotRegress
		}
		if eventTs <= dr.ts {
			return tb.TransferImportedEventTimestampMustPostdateDebitAccount
		}
		if eventTs <= cr.ts {
			return tb.TransferImportedEventTimestampMustPostdateCreditAccount
		}
		if t.Timeout != 0 {
			return tb.TransferImportedEventTimeoutMustBeZero
		}
	}
	if dr.flags&afClosed != 0 {
		return tb.TransferDebitAccountAlreadyClosed
	}
	if cr.flags&afClosed != 0 {
		return tb.TransferCreditAccountAlreadyClosed
	}

	amount := u128.From(t.Amount)
	if t.Flags&tfBalancingDr != 0 {
		d, _ := dr.dPost.Add(dr.dPend)
		if room := subSat(dr.cPost, d); room.Cmp(amount) < 0 {
			amount = room
		}
	}
	if t.Flags&tfBalancingCr != 0 {
		c, _ := cr.cPost.Add(cr.cPend)
		if room := subSat(cr.dPost, c); room.Cmp(amount) < 0 {
			amount = room
		}
	}
	if pending {
		if _, o := amount.Add(dr.dPend); o {
			return tb.TransferOverflowsDebitsPending
		}
		if _, o := amount.Add(cr.cPend); o {
			return tb.TransferOverflowsCreditsPending
		}
	}
	if _, o := amount.Add(dr.dPost); o {
		return tb.TransferOverflowsDebitsPosted
	}
	if _, o := amount.Add(cr.cPost); o {
		return tb.TransferOverflowsCreditsPosted
	}
	if d, _ := dr.dPend.Add(dr.dPost); overflows(amount, d) {
		return tb.TransferOverflowsDebits
	}
	if c, _ := cr.cPend.Add(cr.cPost); overflows(amount, c) {
		return tb.TransferOverflowsCredits
	}
	if timestampMax-eventTs < uint64(t.Timeout)*1e9 {
		return tb.TransferOverflowsTimeout
	}
	if dr.debitsExceedCredits(amount) {
		return tb.TransferExceedsCredits
	}
	if cr.creditsExceedDebits(amount) {
		return tb.TransferExceedsDebits
	}

	// Valid: apply.
	if s.chain {
		s.saveAccount(di)
		s.saveAccount(ci)
	}
	idx := s.storeTransfer(t, h, amount, eventTs, di, ci)
	x := s.transfers.at(idx)
	if pending {
		s.transfers.setState(idx, statePending)
		s.pendingCount++
		dr.dPend, _ = dr.dPend.Add(amount)
		cr.cPend, _ = cr.cPend.Add(amount)
		if t.Timeout > 0 {
			s.schedule(idx, x)
		}
	} else {
		dr.dPost, _ = dr.dPost.Add(amount)
		cr.cPost, _ = cr.cPost.Add(amount)
	}
	if t.Flags&tfClosingDr != 0 {
		dr.flags |= afClosed
	}
	if t.Flags&tfClosingCr != 0 {
		cr.flags |= afClosed
	}
	s.index(idx, dr, cr)
	return tb.TransferCreated
}

// storeTransfer appends the transfer record; the caller fills in the state.
func (s *state) storeTransfer(t *tb.Transfer, h uint64, amount u128.Uint, eventTs uint64, di, ci uint32) uint32 {
	s.transferIDs.addHashed(t.ID, h)
	idx, x := s.transfers.push()
	if s.st != nil {
		s.transfers.ids[idx>>chunkShift][idx&chunkMask] = t.ID
	}
	*x = xfer{
		amount:  amount,
		ud64:    t.UserData64,
		ud32:    t.UserData32,
		ts:      eventTs,
		dr:      di,
		cr:      ci,
		timeout: t.Timeout,
		code:    t.Code,
		flags:   t.Flags,
	}
	if t.UserData128 != tbZero {
		s.transfers.setUD128(idx, t.UserData128)
	}
	if s.chain {
		s.undoLog = append(s.undoLog, undo{kind: undoTransfer})
	}
	return idx
}

// index records transfer idx on both accounts, after their balances changed.
func (s *state) index(idx uint32, dr, cr *acct) {
	dr.debits.push(idx)
	dr.noteEvent()
	cr.credits.push(idx)
	cr.noteEvent()
	if dr.flags&afHistory != 0 {
		dr.history.push(balance{xfer: idx, balances: dr.balances})
	}
	if cr.flags&afHistory != 0 {
		cr.history.push(balance{xfer: idx, balances: cr.balances})
	}
	if s.st != nil {
		x := s.transfers.at(idx)
		s.st.touchAccount(x.dr)
		s.st.touchAccount(x.cr)
	}
}

// postOrVoid creates a transfer that posts or voids a pending transfer; h
// is the hash of its ID.
func (s *state) postOrVoid(t *tb.Transfer, eventTs, h uint64) tb.CreateTransferStatus {
	post := t.Flags&tfPost != 0
	void := t.Flags&tfVoid != 0
	if post && void || t.Flags&(tfPending|tfBalancingDr|tfBalancingCr|tfClosing) != 0 {
		return tb.TransferFlagsAreMutuallyExclusive
	}
	switch {
	case t.PendingID == tbZero:
		return tb.TransferPendingIDMustNotBeZero
	case t.PendingID == tbMaxInt:
		return tb.TransferPendingIDMustNotBeIntMax
	case t.PendingID == t.ID:
		return tb.TransferPendingIDMustBeDifferent
	case t.Timeout != 0:
		return tb.TransferTimeoutReservedForPendingTransfer
	}
	pi, ok := s.transferIDs.find(t.PendingID)
	if !ok {
		return tb.TransferPendingTransferNotFound
	}
	p := s.transfers.at(pi)
	if p.flags&tfPending == 0 {
		return tb.TransferPendingTransferNotPending
	}
	dr, cr := s.accounts.at(p.dr), s.accounts.at(p.cr)
	switch {
	case t.DebitAccountID != tbZero && t.DebitAccountID != dr.id:
		return tb.TransferPendingTransferHasDifferentDebitAccountID
	case t.CreditAccountID != tbZero && t.CreditAccountID != cr.id:
		return tb.TransferPendingTransferHasDifferentCreditAccountID
	case t.Ledger != 0 && t.Ledger != dr.ledger:
		return tb.TransferPendingTransferHasDifferentLedger
	case t.Code != 0 && t.Code != p.code:
		return tb.TransferPendingTransferHasDifferentCode
	}
	amount := u128.From(t.Amount)
	if void && amount.IsZero() || post && amount == u128.Max {
		amount = p.amount
	}
	if p.amount.Cmp(amount) < 0 {
		return tb.TransferExceedsPendingTransferAmount
	}
	if void && amount.Cmp(p.amount) < 0 {
		return tb.TransferPendingTransferHasDifferentAmount
	}
	switch p.state() {
	case statePosted:
		return tb.TransferPendingTransferAlreadyPosted
	case stateVoided:
		return tb.TransferPendingTransferAlreadyVoided
	case stateExpired:
		return tb.TransferPendingTransferExpired
	}
	if p.timeout != 0 && p.expiresAt() <= eventTs {
		return tb.TransferPendingTransferExpired
	}
	if t.Flags&tfImported != 0 {
		if eventTs <= s.lastTransferTimestamp() || s.accountAt(eventTs) {
			return tb.TransferImportedEventTimestampMustNotRegress
		}
	}
	// The only movement allowed in a closed account is voiding.
	if !void {
		if dr.flags&afClosed != 0 {
			return tb.TransferDebitAccountAlreadyClosed
		}
		if cr.flags&afClosed != 0 {
			return tb.TransferCreditAccountAlreadyClosed
		}
	}

	// Valid: apply.
	di, ci := p.dr, p.cr
	if s.chain {
		s.saveAccount(di)
		s.saveAccount(ci)
		s.undoLog = append(s.undoLog, undo{kind: undoState, idx: pi, state: statePending})
	}
	stored := *t
	if stored.UserData128 == tbZero {
		stored.UserData128 = s.transfers.userData128(pi)
	}
	if stored.UserData64 == 0 {
		stored.UserData64 = p.ud64
	}
	if stored.UserData32 == 0 {
		stored.UserData32 = p.ud32
	}
	stored.Code = p.code
	pAmount, pClosing := p.amount, p.flags&tfClosing
	idx := s.storeTransfer(&stored, h, amount, eventTs, di, ci)
	s.transfers.at(idx).pending = pi
	s.pendingCount--
	dr.dPend, _ = dr.dPend.Sub(pAmount)
	cr.cPend, _ = cr.cPend.Sub(pAmount)
	if post {
		s.transfers.setState(pi, statePosted)
		dr.dPost, _ = dr.dPost.Add(amount)
		cr.cPost, _ = cr.cPost.Add(amount)
	} else {
		s.transfers.setState(pi, stateVoided)
		if pClosing&tfClosingDr != 0 {
			dr.flags &^= afClosed
		}
		if pClosing&tfClosingCr != 0 {
			cr.flags &^= afClosed
		}
	}
	s.index(idx, dr, cr)
	return tb.TransferCreated
}

// transferExists compares a resubmitted transfer with the stored transfer i.
func (s *state) transferExists(t *tb.Transfer, i uint32) tb.CreateTransferStatus {
	e := s.transfers.at(i)
	if t.Flags != e.flags&tfUserFlagsMask {
		return tb.TransferExistsWithDifferentFlags
	}
	var pendingID tb.Uint128
	if e.flags&tfPostOrVoid != 0 {
		pendingID = s.transferID(e.pending)
	}
	if t.PendingID != pendingID {
		return tb.TransferExistsWithDifferentPendingID
	}
	if t.Timeout != e.timeout {
		return tb.TransferExistsWithDifferentTimeout
	}
	dr, cr := s.accounts.at(e.dr), s.accounts.at(e.cr)
	if t.Flags&tfPostOrVoid == 0 {
		switch {
		case t.DebitAccountID != dr.id:
			return tb.TransferExistsWithDifferentDebitAccountID
		case t.CreditAccountID != cr.id:
			return tb.TransferExistsWithDifferentCreditAccountID
		}
		amount := u128.From(t.Amount)
		if t.Flags&(tfBalancingDr|tfBalancingCr) != 0 {
			if amount.Cmp(e.amount) < 0 {
				return tb.TransferExistsWithDifferentAmount
			}
		} else if amount != e.amount {
			return tb.TransferExistsWithDifferentAmount
		}
		switch {
		case t.UserData128 != s.transfers.userData128(i):
			return tb.TransferExistsWithDifferentUserData128
		case t.UserData64 != e.ud64:
			return tb.TransferExistsWithDifferentUserData64
		case t.UserData32 != e.ud32:
			return tb.TransferExistsWithDifferentUserData32
		case t.Ledger != dr.ledger:
			return tb.TransferExistsWithDifferentLedger
		case t.Code != e.code:
			return tb.TransferExistsWithDifferentCode
		}
		return tb.TransferExists
	}

	// Post or void: zero fields defaulted to the pending transfer's.
	p := s.transfers.at(e.pending)
	switch {
	case t.DebitAccountID != tbZero && t.DebitAccountID != dr.id:
		return tb.TransferExistsWithDifferentDebitAccountID
	case t.CreditAccountID != tbZero && t.CreditAccountID != cr.id:
		return tb.TransferExistsWithDifferentCreditAccountID
	}
	amount := u128.From(t.Amount)
	if t.Flags&tfVoid != 0 && amount.IsZero() || t.Flags&tfPost != 0 && amount == u128.Max {
		if e.amount != p.amount {
			return tb.TransferExistsWithDifferentAmount
		}
	} else if amount != e.amount {
		return tb.TransferExistsWithDifferentAmount
	}
	if want := orDefault(t.UserData128, s.transfers.userData128(e.pending)); want != s.transfers.userData128(i) {
		return tb.TransferExistsWithDifferentUserData128
	}
	if want := orDefault(t.UserData64, p.ud64); want != e.ud64 {
		return tb.TransferExistsWithDifferentUserData64
	}
	if want := orDefault(t.UserData32, p.ud32); want != e.ud32 {
		return tb.TransferExistsWithDifferentUserData32
	}
	if t.Ledger != 0 && t.Ledger != dr.ledger {
		return tb.TransferExistsWithDifferentLedger
	}
	if t.Code != 0 && t.Code != e.code {
		return tb.TransferExistsWithDifferentCode
	}
	return tb.TransferExists
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
