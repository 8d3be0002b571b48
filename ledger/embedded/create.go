package embedded

import tb "github.com/tigerbeetle/tigerbeetle-go"

// The create requests, create_accounts and create_transfers, share one
// driver: the batch-level rules (imported batches, timestamps) and linked
// chains are the same for both, as in TigerBeetle's execute_create
// (src/state_machine.zig). What differs, validating and applying one event
// and the result types, is behind the creator interface.

// batchCheck is a failure the driver finds before an event is validated
// on its own; each creator turns it into its own status.
type batchCheck uint8

const (
	linkedEventChainOpen batchCheck = iota
	linkedEventFailed
	importedEventNotExpected
	importedEventExpected
	importedEventTimestampOutOfRange
	importedEventTimestampMustNotAdvance
	timestampMustBeZero
)

// creator is what the driver needs of one kind of create request, with
// events E and results R.
type creator[E, R any] interface {
	// event returns event i's linked and imported flags and its timestamp
	// field.
	event(i int, e E) (linked, imported bool, ts uint64)
	// create validates and applies event i, which takes timestamp eventTs
	// (its own if imported) and is validated at ts.
	create(i int, e E, eventTs, ts uint64) R
	// fail returns the result of an event refused for reason c at ts.
	fail(c batchCheck, ts uint64) R
	// ok reports whether r is a success.
	ok(r R) bool
	// failLinked turns the result of an event applied in a chain that
	// failed later into linked_event_failed, keeping its timestamp.
	failLinked(r *R)
	// failed is told of each event i that did not succeed, with its final
	// result.
	failed(i int, e E, r R)
}

// create executes a create request stamped at base, writing one result per
// event, and returns the last timestamp the request took. Its events get
// consecutive timestamps after base and after those of the expiries
// released first (see state.open).
//
// A linked chain is every event from one with flags.linked up to the first
// without it. An event that fails breaks its chain: what the chain applied
// is rolled back, and its other events answer linked_event_failed. A chain
// still open at the end of the batch fails with linked_event_chain_open on
// its last event. The first event decides whether the batch imports events
// (with timestamps of their own, before the request's) or not.
func create[E, R any, C creator[E, R]](s *state, c C, base uint64, events []E, results []R) uint64 {
	base = s.open(base)
	n := len(events)
	request := base + uint64(n) // the request's own timestamp
	imported := false
	if n > 0 {
		_, imported, _ = c.event(0, events[0])
	}
	chainStart, broken := -1, false
	for i := range events {
		e := events[i]
		linked, evImported, evTs := c.event(i, e)
		ts := base + uint64(i) + 1
		if linked && chainStart < 0 {
			chainStart = i
			s.beginChain()
		}
		var r R
		switch {
		case linked && i == n-1:
			r = c.fail(linkedEventChainOpen, ts)
		case broken:
			r = c.fail(linkedEventFailed, ts)
		case evImported && !imported:
			r = c.fail(importedEventNotExpected, ts)
		case !evImported && imported:
			r = c.fail(importedEventExpected, ts)
		case imported && !validTimestamp(evTs):
			r = c.fail(importedEventTimestampOutOfRange, ts)
		case imported && evTs >= request:
			r = c.fail(importedEventTimestampMustNotAdvance, ts)
		case !imported && evTs != 0:
			r = c.fail(timestampMustBeZero, ts)
		case imported:
			r = c.create(i, e, evTs, ts)
		default:
			r = c.create(i, e, ts, ts)
		}
		results[i] = r
		if !c.ok(r) {
			if chainStart >= 0 && !broken {
				broken = true
				s.rollback()
				for j := chainStart; j < i; j++ {
					c.failLinked(&results[j])
				}
			}
			c.failed(i, e, r)
		}
		// The chain ends with an event that is not linked, or with the batch.
		if chainStart >= 0 && (!linked || i == n-1) {
			chainStart, broken = -1, false
			s.endChain()
		}
	}
	s.close(base, n)
	return request
}

// createAccounts executes a create_accounts request stamped at base and
// returns the last timestamp it took.
func (s *state) createAccounts(base uint64, events []tb.Account, results []tb.CreateAccountResult) uint64 {
	return create(s, accountCreator{s}, base, events, results)
}

// createTransfers executes a create_transfers request stamped at base and
// returns the last timestamp it took.
func (s *state) createTransfers(base uint64, events []tb.Transfer, results []tb.CreateTransferResult) uint64 {
	s.hotDr, s.hotCr = acctRef{}, acctRef{}
	return create(s, transferCreator{s, s.hashIDs(events)}, base, events, results)
}

type accountCreator struct{ s *state }

func (c accountCreator) event(_ int, a tb.Account) (linked, imported bool, ts uint64) {
	return a.Flags&afLinked != 0, a.Flags&afImported != 0, a.Timestamp
}

func (c accountCreator) create(_ int, a tb.Account, eventTs, ts uint64) tb.CreateAccountResult {
	status, rts := c.s.createAccount(&a, eventTs, ts)
	return tb.CreateAccountResult{Timestamp: rts, Status: status}
}

func (accountCreator) fail(check batchCheck, ts uint64) tb.CreateAccountResult {
	var status tb.CreateAccountStatus
	switch check {
	case linkedEventChainOpen:
		status = tb.AccountLinkedEventChainOpen
	case linkedEventFailed:
		status = tb.AccountLinkedEventFailed
	case importedEventNotExpected:
		status = tb.AccountImportedEventNotExpected
	case importedEventExpected:
		status = tb.AccountImportedEventExpected
	case importedEventTimestampOutOfRange:
		status = tb.AccountImportedEventTimestampOutOfRange
	case importedEventTimestampMustNotAdvance:
		status = tb.AccountImportedEventTimestampMustNotAdvance
	case timestampMustBeZero:
		status = tb.AccountTimestampMustBeZero
	default:
		panic("embedded: unknown batch check")
	}
	return tb.CreateAccountResult{Timestamp: ts, Status: status}
}

func (accountCreator) ok(r tb.CreateAccountResult) bool { return r.Status == tb.AccountCreated }

func (accountCreator) failLinked(r *tb.CreateAccountResult) { r.Status = tb.AccountLinkedEventFailed }

// failed: no create_accounts status depends on the state at the time, so
// a failed account's ID stays usable.
func (accountCreator) failed(int, tb.Account, tb.CreateAccountResult) {}

type transferCreator struct {
	s  *state
	hs []uint64 // the hashes of the request's transfer IDs
}

// event also reads ahead, every touchBlock events, the slots where the
// next transfers' IDs will be looked up.
func (c transferCreator) event(i int, t tb.Transfer) (linked, imported bool, ts uint64) {
	if i%touchBlock == 0 {
		c.s.touchSlots(c.hs[i:min(i+touchBlock, len(c.hs))])
	}
	return t.Flags&tfLinked != 0, t.Flags&tfImported != 0, t.Timestamp
}

func (c transferCreator) create(i int, t tb.Transfer, eventTs, ts uint64) tb.CreateTransferResult {
	status, rts := c.s.createTransfer(&t, eventTs, ts, c.hs[i])
	return tb.CreateTransferResult{Timestamp: rts, Status: status}
}

func (transferCreator) fail(check batchCheck, ts uint64) tb.CreateTransferResult {
	var status tb.CreateTransferStatus
	switch check {
	case linkedEventChainOpen:
		status = tb.TransferLinkedEventChainOpen
	case linkedEventFailed:
		status = tb.TransferLinkedEventFailed
	case importedEventNotExpected:
		status = tb.TransferImportedEventNotExpected
	case importedEventExpected:
		status = tb.TransferImportedEventExpected
	case importedEventTimestampOutOfRange:
		status = tb.TransferImportedEventTimestampOutOfRange
	case importedEventTimestampMustNotAdvance:
		status = tb.TransferImportedEventTimestampMustNotAdvance
	case timestampMustBeZero:
		status = tb.TransferTimestampMustBeZero
	default:
		panic("embedded: unknown batch check")
	}
	return tb.CreateTransferResult{Timestamp: ts, Status: status}
}

func (transferCreator) ok(r tb.CreateTransferResult) bool { return r.Status == tb.TransferCreated }

func (transferCreator) failLinked(r *tb.CreateTransferResult) {
	r.Status = tb.TransferLinkedEventFailed
}

// failed uses up the ID of a transfer that failed for a transient reason
// (see transient).
func (c transferCreator) failed(i int, t tb.Transfer, r tb.CreateTransferResult) {
	if transient(r.Status) {
		c.s.failedIDs.addHashed(t.ID, c.hs[i])
	}
}
