package embedded_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/testenv"
)

// changes returns the change events of the fixture's ledger from timestamp
// from on, in the order they came. A real server is shared by the package's
// tests, and get_change_events reports every ledger's events (and expiries
// of earlier tests' transfers may fall in the range), so the others are
// left out.
func (f *fixture) changes(from uint64) []tb.ChangeEvent {
	f.t.Helper()
	got, err := f.c.GetChangeEvents(tb.ChangeEventsFilter{TimestampMin: from, Limit: 2000})
	if err != nil {
		f.t.Fatalf("GetChangeEvents(from %d) = %v", from, err)
	}
	var out []tb.ChangeEvent
	for i, ev := range got {
		if i > 0 && ev.Timestamp <= got[i-1].Timestamp {
			f.t.Fatalf("GetChangeEvents: event %d at %d after %d: not in timestamp order", i, ev.Timestamp, got[i-1].Timestamp)
		}
		if ev.Ledger == f.ledger {
			out = append(out, ev)
		}
	}
	return out
}

// change is what a test expects of a change event.
type change struct {
	typ    tb.ChangeEventType
	id     tb.Uint128
	amount uint64
	dr, cr bal // the accounts' balances right after the event
}

func (c change) String() string {
	return fmt.Sprintf("{%v %d dr %v cr %v}", c.typ, c.amount, c.dr, c.cr)
}

func changeOf(ev tb.ChangeEvent) change {
	return change{
		typ:    ev.Type,
		id:     ev.TransferID,
		amount: lo(ev.TransferAmount),
		dr:     bal{lo(ev.DebitAccountDebitsPending), lo(ev.DebitAccountDebitsPosted), lo(ev.DebitAccountCreditsPending), lo(ev.DebitAccountCreditsPosted)},
		cr:     bal{lo(ev.CreditAccountDebitsPending), lo(ev.CreditAccountDebitsPosted), lo(ev.CreditAccountCreditsPending), lo(ev.CreditAccountCreditsPosted)},
	}
}

// replayChanges checks that every event's balances are those of the
// previous event of the same account plus the event itself, starting from
// the balances in start (zero for accounts not in it), and that every
// event's fields agree with its type. It returns the balances after the
// last event.
func replayChanges(t *testing.T, events []tb.ChangeEvent, start map[tb.Uint128]bal) map[tb.Uint128]bal {
	t.Helper()
	now := map[tb.Uint128]bal{}
	for id, b := range start {
		now[id] = b
	}
	pending := map[tb.Uint128]uint64{}
	for i, ev := range events {
		c := changeOf(ev)
		dr, cr := now[ev.DebitAccountID], now[ev.CreditAccountID]
		switch ev.Type {
		case tb.ChangeEventSinglePhase:
			dr.dPost += c.amount
			cr.cPost += c.amount
		case tb.ChangeEventTwoPhasePending:
			dr.dPend += c.amount
			cr.cPend += c.amount
			pending[ev.TransferID] = c.amount
		case tb.ChangeEventTwoPhasePosted:
			dr.dPend -= pending[ev.TransferPendingID]
			cr.cPend -= pending[ev.TransferPendingID]
			dr.dPost += c.amount
			cr.cPost += c.amount
		case tb.ChangeEventTwoPhaseVoided:
			dr.dPend -= pending[ev.TransferPendingID]
			cr.cPend -= pending[ev.TransferPendingID]
		case tb.ChangeEventTwoPhaseExpired:
			dr.dPend -= pending[ev.TransferID]
			cr.cPend -= pending[ev.TransferID]
		}
		now[ev.DebitAccountID], now[ev.CreditAccountID] = dr, cr
		if c.dr != dr || c.cr != cr {
			t.Fatalf("event %d (%v): balances dr %v cr %v, want dr %v cr %v from the events before it", i, ev.Type, c.dr, c.cr, dr, cr)
		}
		flags := tb.TransferFlags{}
		switch ev.Type {
		case tb.ChangeEventSinglePhase:
		case tb.ChangeEventTwoPhasePending, tb.ChangeEventTwoPhaseExpired:
			flags.Pending = true
		case tb.ChangeEventTwoPhasePosted:
			flags.PostPendingTransfer = true
		case tb.ChangeEventTwoPhaseVoided:
			flags.VoidPendingTransfer = true
		}
		got := ev.TransferFlags & (fPending | fPost | fVoid)
		hasPendingID := ev.TransferPendingID != tb.Uint128{}
		if got != flags.ToUint16() || hasPendingID != (flags.PostPendingTransfer || flags.VoidPendingTransfer) {
			t.Fatalf("event %d (%v): transfer flags %#x, pending ID %v", i, ev.Type, ev.TransferFlags, ev.TransferPendingID)
		}
		if ev.Type == tb.ChangeEventTwoPhaseExpired {
			if ev.TransferTimeout == 0 || ev.Timestamp < ev.TransferTimestamp+uint64(ev.TransferTimeout)*1e9 {
				t.Fatalf("event %d: expired at %d, transfer stamped %d with timeout %d s", i, ev.Timestamp, ev.TransferTimestamp, ev.TransferTimeout)
			}
		} else if ev.Timestamp != ev.TransferTimestamp {
			t.Fatalf("event %d (%v): timestamp %d, transfer timestamp %d", i, ev.Type, ev.Timestamp, ev.TransferTimestamp)
		}
		if ev.Reserved != [39]uint8{} {
			t.Fatalf("event %d: reserved bytes %v", i, ev.Reserved)
		}
	}
	return now
}

// TestGetChangeEvents checks every kind of change event and every field of
// one: what the transfer was, the accounts as they are, and their balances
// and flags as they were right after the event.
func TestGetChangeEvents(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		a := f.account(aHistory)
		a.UserData128, a.UserData64, a.UserData32, a.Code = u(11), 12, 13, 14
		c := f.account(aDebitsLimited)
		c.UserData128, c.UserData64, c.UserData32, c.Code = u(21), 22, 23, 24
		ares := f.createAccounts(a, c)

		single := f.transfer(a.ID, c.ID, 10)
		single.UserData128, single.UserData64, single.UserData32, single.Code = u(31), 32, 33, 34
		p := f.pending(c.ID, a.ID, 6, 0)
		post := f.resolve(fPost, p, u(4))
		post.UserData64 = 42 // the others are the pending transfer's
		v := f.pending(c.ID, a.ID, 3, 0)
		void := f.resolve(fVoid, v, u(0))
		res := f.must(single, p, post, v, void)
		// Failed and rolled-back transfers are no events.
		f.expect([]tb.Transfer{f.transfer(c.ID, a.ID, 100)}, tb.TransferExceedsCredits)
		f.expect([]tb.Transfer{linked(f.transfer(a.ID, c.ID, 1)), f.transfer(c.ID, a.ID, 100)},
			tb.TransferLinkedEventFailed, tb.TransferExceedsCredits)
		// Balancing: the amount moved, not the one asked.
		balancing := f.transfer(c.ID, a.ID, 0)
		balancing.Flags, balancing.Amount = fBalancingDr, amountMax
		// Closing: the account is closed after the pending transfer, open
		// again after its void.
		closing := f.pending(a.ID, c.ID, 0, 0)
		closing.Flags |= fClosingDr
		reopen := f.resolve(fVoid, closing, u(0))
		f.must(balancing, closing, reopen)
		exp := f.pending(a.ID, c.ID, 2, 1)
		exp.UserData32 = 7
		expRes := f.must(exp)
		b.Advance(t, 2*time.Second)
		f.balance(a.ID, bal{dPost: 10, cPost: 10})

		events := f.changes(res[0].Timestamp)
		ten := bal{dPost: 10, cPost: 10}
		want := []change{
			{tb.ChangeEventSinglePhase, single.ID, 10, bal{dPost: 10}, bal{cPost: 10}},
			{tb.ChangeEventTwoPhasePending, p.ID, 6, bal{dPend: 6, cPost: 10}, bal{dPost: 10, cPend: 6}},
			{tb.ChangeEventTwoPhasePosted, post.ID, 4, bal{dPost: 4, cPost: 10}, bal{dPost: 10, cPost: 4}},
			{tb.ChangeEventTwoPhasePending, v.ID, 3, bal{dPend: 3, dPost: 4, cPost: 10}, bal{dPost: 10, cPend: 3, cPost: 4}},
			{tb.ChangeEventTwoPhaseVoided, void.ID, 3, bal{dPost: 4, cPost: 10}, bal{dPost: 10, cPost: 4}},
			{tb.ChangeEventSinglePhase, balancing.ID, 6, ten, ten},
			{tb.ChangeEventTwoPhasePending, closing.ID, 0, ten, ten},
			{tb.ChangeEventTwoPhaseVoided, reopen.ID, 0, ten, ten},
			{tb.ChangeEventTwoPhasePending, exp.ID, 2, bal{dPend: 2, dPost: 10, cPost: 10}, bal{dPost: 10, cPend: 2, cPost: 10}},
			{tb.ChangeEventTwoPhaseExpired, exp.ID, 2, ten, ten},
		}
		if len(events) != len(want) {
			t.Fatalf("GetChangeEvents = %d events, want %d: %v", len(events), len(want), events)
		}
		for i, w := range want {
			if got := changeOf(events[i]); got != w {
				t.Errorf("event %d = %v, want %v", i, got, w)
			}
		}
		replayChanges(t, events, nil)
		for i, r := range res {
			if events[i].Timestamp != r.Timestamp {
				t.Errorf("event %d: timestamp %d, want the transfer's %d", i, events[i].Timestamp, r.Timestamp)
			}
		}

		// Every field of a single-phase event.
		wantSingle := tb.ChangeEvent{
			TransferID:          single.ID,
			TransferAmount:      u(10),
			TransferUserData128: u(31),
			TransferUserData64:  32,
			TransferUserData32:  33,
			TransferCode:        34,
			Ledger:              f.ledger,
			Type:                tb.ChangeEventSinglePhase,

			DebitAccountID:           a.ID,
			DebitAccountDebitsPosted: u(10),
			DebitAccountUserData128:  u(11),
			DebitAccountUserData64:   12,
			DebitAccountUserData32:   13,
			DebitAccountCode:         14,
			DebitAccountFlags:        aHistory,

			CreditAccountID:            c.ID,
			CreditAccountCreditsPosted: u(10),
			CreditAccountUserData128:   u(21),
			CreditAccountUserData64:    22,
			CreditAccountUserData32:    23,
			CreditAccountCode:          24,
			CreditAccountFlags:         aDebitsLimited,

			Timestamp:              res[0].Timestamp,
			TransferTimestamp:      res[0].Timestamp,
			DebitAccountTimestamp:  ares[0].Timestamp,
			CreditAccountTimestamp: ares[1].Timestamp,
		}
		if events[0] != wantSingle {
			t.Errorf("single-phase event = %+v\nwant %+v", events[0], wantSingle)
		}
		// A post carries the stored transfer: its own user data where it
		// has some, the pending transfer's elsewhere, the pending code.
		if ev := events[2]; ev.TransferPendingID != p.ID || ev.TransferUserData64 != 42 || ev.TransferCode != p.Code ||
			ev.TransferFlags != fPost || ev.TransferTimeout != 0 || ev.TransferTimestamp != res[2].Timestamp {
			t.Errorf("post event = %+v", ev)
		}
		// Account flags are those right after the event.
		if ev := events[6]; ev.DebitAccountFlags != aHistory|aClosed || ev.TransferFlags != fPending|fClosingDr {
			t.Errorf("closing event: debit account flags %#x, transfer flags %#x; want %#x, %#x", ev.DebitAccountFlags, ev.TransferFlags, aHistory|aClosed, fPending|fClosingDr)
		}
		if ev := events[7]; ev.DebitAccountFlags != aHistory {
			t.Errorf("void of the closing transfer: debit account flags %#x, want %#x", ev.DebitAccountFlags, aHistory)
		}
		// An expiry is the pending transfer's event, at a timestamp of its own.
		ev := events[9]
		if ev.TransferUserData32 != 7 || ev.TransferTimeout != 1 || ev.TransferFlags != fPending ||
			ev.TransferTimestamp != expRes[0].Timestamp || ev.TransferPendingID != (tb.Uint128{}) {
			t.Errorf("expiry event = %+v", ev)
		}
		if ev.Timestamp < expRes[0].Timestamp+1e9 {
			t.Errorf("expiry event at %d, before the transfer's expiry at %d", ev.Timestamp, expRes[0].Timestamp+1e9)
		}
	})
}

// TestGetChangeEventsFilter checks the filter: the timestamp range (both
// ends inclusive), the limit, paging, and what makes a filter invalid.
func TestGetChangeEventsFilter(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		var batch []tb.Transfer
		for i := range 10 {
			batch = append(batch, f.transfer(acc[i%2], acc[1-i%2], uint64(i+1)))
		}
		res := f.must(batch...)
		first, last := res[0].Timestamp, res[9].Timestamp
		get := func(fl tb.ChangeEventsFilter) []tb.ChangeEvent {
			t.Helper()
			got, err := f.c.GetChangeEvents(fl)
			if err != nil {
				t.Fatalf("GetChangeEvents(%+v) = %v", fl, err)
			}
			if got == nil {
				t.Fatalf("GetChangeEvents(%+v) = nil, want an empty slice", fl)
			}
			return got
		}
		amounts := func(events []tb.ChangeEvent) string {
			var s []uint64
			for _, ev := range events {
				if ev.Ledger == f.ledger {
					s = append(s, lo(ev.TransferAmount))
				}
			}
			return fmt.Sprint(s)
		}
		tests := []struct {
			name   string
			filter tb.ChangeEventsFilter
			want   string
		}{
			{"range", tb.ChangeEventsFilter{TimestampMin: first, TimestampMax: last, Limit: 100}, "[1 2 3 4 5 6 7 8 9 10]"},
			{"range, inclusive", tb.ChangeEventsFilter{TimestampMin: res[2].Timestamp, TimestampMax: res[4].Timestamp, Limit: 100}, "[3 4 5]"},
			{"one", tb.ChangeEventsFilter{TimestampMin: res[2].Timestamp, TimestampMax: res[2].Timestamp, Limit: 100}, "[3]"},
			{"limit", tb.ChangeEventsFilter{TimestampMin: first, Limit: 3}, "[1 2 3]"},
			{"timestamp_max only", tb.ChangeEventsFilter{TimestampMin: 0, TimestampMax: last, Limit: 2000}, "[1 2 3 4 5 6 7 8 9 10]"},
			{"timestamp_max 2^63-1", tb.ChangeEventsFilter{TimestampMin: first, TimestampMax: timestampMax, Limit: 100}, "[1 2 3 4 5 6 7 8 9 10]"},
			{"invalid: limit 0", tb.ChangeEventsFilter{TimestampMin: first}, "[]"},
			{"invalid: min after max", tb.ChangeEventsFilter{TimestampMin: last, TimestampMax: first, Limit: 100}, "[]"},
			{"invalid: timestamp_max 2^63", tb.ChangeEventsFilter{TimestampMin: first, TimestampMax: timestampMax + 1, Limit: 100}, "[]"},
			{"invalid: timestamp_min 2^63", tb.ChangeEventsFilter{TimestampMin: timestampMax + 1, Limit: 100}, "[]"},
			{"invalid: timestamp_min max", tb.ChangeEventsFilter{TimestampMin: ^uint64(0), Limit: 100}, "[]"},
			{"invalid: reserved", tb.ChangeEventsFilter{TimestampMin: first, Limit: 100, Reserved: [44]uint8{43: 1}}, "[]"},
		}
		for _, tt := range tests {
			got := get(tt.filter)
			if s := amounts(got); s != tt.want {
				t.Errorf("%s: GetChangeEvents = %s, want %s", tt.name, s, tt.want)
			}
			if tt.want == "[]" && len(got) != 0 {
				t.Errorf("%s: GetChangeEvents = %d events, want none", tt.name, len(got))
			}
		}

		// Paging: each page starts after the previous one's last event.
		var paged []tb.ChangeEvent
		for from := first; ; {
			page := get(tb.ChangeEventsFilter{TimestampMin: from, TimestampMax: last, Limit: 4})
			paged = append(paged, page...)
			if len(page) < 4 {
				break
			}
			from = page[len(page)-1].Timestamp + 1
		}
		if s := amounts(paged); s != "[1 2 3 4 5 6 7 8 9 10]" {
			t.Errorf("paged GetChangeEvents = %s", s)
		}

		// A reply holds at most 2730 events of 384 bytes.
		if _, err := f.c.GetChangeEvents(tb.ChangeEventsFilter{TimestampMin: last, Limit: 2730}); err != nil {
			t.Errorf("GetChangeEvents(limit 2730) = %v", err)
		}
		for _, limit := range []uint32{2731, 8189, ^uint32(0)} {
			if _, err := f.c.GetChangeEvents(tb.ChangeEventsFilter{Limit: limit}); !errors.Is(err, tb.ErrTooMuchData) {
				t.Errorf("GetChangeEvents(limit %d) error = %v, want ErrTooMuchData", limit, err)
			}
		}
	})
}

// TestGetChangeEventsHistory checks the balances of many events of one
// account, across rolled-back chains and expiries that come due together:
// each event's balances are the previous event's plus its own.
func TestGetChangeEventsHistory(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(aDebitsLimited, 0)
		user, op := acc[0], acc[1]
		start := f.must(f.transfer(op, user, 1000))[0].Timestamp
		var expiring []tb.Transfer
		for round := range 3 {
			var batch []tb.Transfer
			for i := range 30 {
				switch i % 5 {
				case 0:
					batch = append(batch, f.transfer(user, op, uint64(i)))
				case 1, 2:
					p := f.pending(user, op, uint64(i), 0)
					r := f.resolve(fVoid, p, u(0))
					if i%2 == 0 {
						r = f.resolve(fPost, p, u(uint64(i/2)))
					}
					batch = append(batch, p, r)
				case 3:
					p := f.pending(user, op, 1, 1)
					batch = append(batch, p)
					expiring = append(expiring, p)
				case 4:
					batch = append(batch, f.transfer(op, user, uint64(i)))
				}
			}
			f.must(batch...)
			// A chain of 40 that fails at its end changes nothing.
			var chain []tb.Transfer
			for range 39 {
				chain = append(chain, linked(f.pending(user, op, 1, 1)))
			}
			chain = append(chain, f.transfer(user, op, 1_000_000))
			want := make([]tb.CreateTransferStatus, len(chain))
			for i := range want {
				want[i] = tb.TransferLinkedEventFailed
			}
			want[len(want)-1] = tb.TransferExceedsCredits
			f.expect(chain, want...)
			if round == 1 {
				b.Advance(t, 2*time.Second) // the first two rounds' reservations expire
			}
		}
		b.Advance(t, 2*time.Second)
		after := f.lookupAccount(user)

		events := f.changes(start)
		counts := map[tb.ChangeEventType]int{}
		for _, ev := range events {
			counts[ev.Type]++
		}
		if want := 3*(6+24+6+6) + 1; len(events) != want+len(expiring) {
			t.Fatalf("GetChangeEvents = %d events %v, want %d", len(events), counts, want+len(expiring))
		}
		if counts[tb.ChangeEventTwoPhaseExpired] != len(expiring) {
			t.Fatalf("GetChangeEvents: %d expiries, want %d", counts[tb.ChangeEventTwoPhaseExpired], len(expiring))
		}
		end := replayChanges(t, events, nil)
		if end[user] != balOf(after) {
			t.Fatalf("balances after the last event %v, want the account's %v", end[user], balOf(after))
		}
	})
}

// TestGetChangeEventsClosingExpiry checks account flags across the expiry
// of a closing transfer: closed by it, open after its expiry, closed again
// by the next closing transfer.
func TestGetChangeEventsClosingExpiry(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		a, c := acc[0], acc[1]
		x := f.pending(a, c, 1, 1)
		x.Flags |= fClosingDr
		start := f.must(x)[0].Timestamp
		b.Advance(t, 2*time.Second)
		y := f.pending(a, c, 2, 0)
		y.Flags |= fClosingDr
		f.must(y)
		var got []string
		for _, ev := range f.changes(start) {
			got = append(got, fmt.Sprintf("%v closed=%v", ev.Type, ev.DebitAccountFlags&aClosed != 0))
		}
		want := []string{"ChangeEventTwoPhasePending closed=true", "ChangeEventTwoPhaseExpired closed=false", "ChangeEventTwoPhasePending closed=true"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("GetChangeEvents = %v, want %v", got, want)
		}
	})
}
