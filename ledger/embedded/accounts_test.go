package embedded_test

import (
	"fmt"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/testenv"
)

func accountStatuses(res []tb.CreateAccountResult) string {
	s := make([]tb.CreateAccountStatus, len(res))
	for i, r := range res {
		s[i] = r.Status
	}
	return fmt.Sprint(s)
}

func TestCreateAccountStatuses(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		// existing is the account that resubmissions compare against.
		existing := f.account(aHistory)
		existing.UserData128, existing.UserData64, existing.UserData32 = u(1), 2, 3
		f.createAccounts(existing)
		got := f.lookupAccount(existing.ID)

		type mod func(a *tb.Account)
		fresh := func(mods ...mod) tb.Account {
			a := f.account(0)
			for _, m := range mods {
				m(&a)
			}
			return a
		}
		again := func(mods ...mod) tb.Account {
			a := existing
			for _, m := range mods {
				m(&a)
			}
			return a
		}
		var (
			id0       = func(a *tb.Account) { a.ID = tb.Uint128{} }
			reserved  = func(a *tb.Account) { a.Reserved = 1 }
			padding   = func(a *tb.Account) { a.Flags |= 1 << 6 }
			stamped   = func(a *tb.Account) { a.Timestamp = 1 }
			ledger0   = func(a *tb.Account) { a.Ledger = 0 }
			code0     = func(a *tb.Account) { a.Code = 0 }
			bothLimit = func(a *tb.Account) { a.Flags |= aDebitsLimited | aCreditLimited }
			linked    = func(a *tb.Account) { a.Flags |= aLinked }
			imported  = func(ts uint64) mod {
				return func(a *tb.Account) { a.Flags |= aImported; a.Timestamp = ts }
			}
		)
		tests := []struct {
			name  string
			batch []tb.Account
			want  []tb.CreateAccountStatus
		}{
			{"created", []tb.Account{fresh()}, []tb.CreateAccountStatus{tb.AccountCreated}},
			{"created closed", []tb.Account{fresh(func(a *tb.Account) { a.Flags = aClosed })}, []tb.CreateAccountStatus{tb.AccountCreated}},
			{"timestamp_must_be_zero", []tb.Account{fresh(stamped)}, []tb.CreateAccountStatus{tb.AccountTimestampMustBeZero}},
			{"timestamp_must_be_zero before reserved_field", []tb.Account{fresh(stamped, reserved)}, []tb.CreateAccountStatus{tb.AccountTimestampMustBeZero}},
			{"reserved_field", []tb.Account{fresh(reserved)}, []tb.CreateAccountStatus{tb.AccountReservedField}},
			{"reserved_field before reserved_flag", []tb.Account{fresh(reserved, padding)}, []tb.CreateAccountStatus{tb.AccountReservedField}},
			{"reserved_flag", []tb.Account{fresh(func(a *tb.Account) { a.Flags = 1 << 15 })}, []tb.CreateAccountStatus{tb.AccountReservedFlag}},
			{"reserved_flag before id_must_not_be_zero", []tb.Account{fresh(padding, id0)}, []tb.CreateAccountStatus{tb.AccountReservedFlag}},
			{"id_must_not_be_zero", []tb.Account{fresh(id0)}, []tb.CreateAccountStatus{tb.AccountIDMustNotBeZero}},
			{"id_must_not_be_zero before ledger_must_not_be_zero", []tb.Account{fresh(id0, ledger0)}, []tb.CreateAccountStatus{tb.AccountIDMustNotBeZero}},
			{"id_must_not_be_int_max", []tb.Account{fresh(func(a *tb.Account) { a.ID = idMax })}, []tb.CreateAccountStatus{tb.AccountIDMustNotBeIntMax}},
			{"exists", []tb.Account{again()}, []tb.CreateAccountStatus{tb.AccountExists}},
			{"exists_with_different_flags", []tb.Account{again(func(a *tb.Account) { a.Flags = 0 })}, []tb.CreateAccountStatus{tb.AccountExistsWithDifferentFlags}},
			{"exists_with_different_flags before user_data_128", []tb.Account{again(func(a *tb.Account) { a.Flags = 0; a.UserData128 = u(9) })}, []tb.CreateAccountStatus{tb.AccountExistsWithDifferentFlags}},
			{"exists_with_different_user_data_128", []tb.Account{again(func(a *tb.Account) { a.UserData128 = u(9); a.UserData64 = 9 })}, []tb.CreateAccountStatus{tb.AccountExistsWithDifferentUserData128}},
			{"exists_with_different_user_data_64", []tb.Account{again(func(a *tb.Account) { a.UserData64 = 9; a.UserData32 = 9 })}, []tb.CreateAccountStatus{tb.AccountExistsWithDifferentUserData64}},
			{"exists_with_different_user_data_32", []tb.Account{again(func(a *tb.Account) { a.UserData32 = 9; a.Ledger = 9 })}, []tb.CreateAccountStatus{tb.AccountExistsWithDifferentUserData32}},
			{"exists_with_different_ledger", []tb.Account{again(func(a *tb.Account) { a.Ledger = 9; a.Code = 9 })}, []tb.CreateAccountStatus{tb.AccountExistsWithDifferentLedger}},
			{"exists_with_different_code", []tb.Account{again(func(a *tb.Account) { a.Code = 9 })}, []tb.CreateAccountStatus{tb.AccountExistsWithDifferentCode}},
			{"exists_with_different_code before code_must_not_be_zero", []tb.Account{again(code0)}, []tb.CreateAccountStatus{tb.AccountExistsWithDifferentCode}},
			{"exists before flags_are_mutually_exclusive", []tb.Account{again(func(a *tb.Account) { a.Flags |= aDebitsLimited | aCreditLimited })}, []tb.CreateAccountStatus{tb.AccountExistsWithDifferentFlags}},
			{"flags_are_mutually_exclusive", []tb.Account{fresh(bothLimit)}, []tb.CreateAccountStatus{tb.AccountFlagsAreMutuallyExclusive}},
			{"flags_are_mutually_exclusive before debits_pending_must_be_zero", []tb.Account{fresh(bothLimit, func(a *tb.Account) { a.DebitsPending = u(1) })}, []tb.CreateAccountStatus{tb.AccountFlagsAreMutuallyExclusive}},
			{"debits_pending_must_be_zero", []tb.Account{fresh(func(a *tb.Account) { a.DebitsPending = u(1); a.DebitsPosted = u(1) })}, []tb.CreateAccountStatus{tb.AccountDebitsPendingMustBeZero}},
			{"debits_posted_must_be_zero", []tb.Account{fresh(func(a *tb.Account) { a.DebitsPosted = u(1); a.CreditsPending = u(1) })}, []tb.CreateAccountStatus{tb.AccountDebitsPostedMustBeZero}},
			{"credits_pending_must_be_zero", []tb.Account{fresh(func(a *tb.Account) { a.CreditsPending = u(1); a.CreditsPosted = u(1) })}, []tb.CreateAccountStatus{tb.AccountCreditsPendingMustBeZero}},
			{"credits_posted_must_be_zero before ledger_must_not_be_zero", []tb.Account{fresh(func(a *tb.Account) { a.CreditsPosted = u(1) }, ledger0)}, []tb.CreateAccountStatus{tb.AccountCreditsPostedMustBeZero}},
			{"ledger_must_not_be_zero before code_must_not_be_zero", []tb.Account{fresh(ledger0, code0)}, []tb.CreateAccountStatus{tb.AccountLedgerMustNotBeZero}},
			{"code_must_not_be_zero", []tb.Account{fresh(code0)}, []tb.CreateAccountStatus{tb.AccountCodeMustNotBeZero}},
			{"linked chain", []tb.Account{fresh(linked), fresh(linked), fresh()}, []tb.CreateAccountStatus{tb.AccountCreated, tb.AccountCreated, tb.AccountCreated}},
			{"linked chain fails as a whole", []tb.Account{fresh(linked), fresh(linked, code0), fresh()}, []tb.CreateAccountStatus{tb.AccountLinkedEventFailed, tb.AccountCodeMustNotBeZero, tb.AccountLinkedEventFailed}},
			{"first event fails the chain", []tb.Account{fresh(linked, id0), fresh()}, []tb.CreateAccountStatus{tb.AccountIDMustNotBeZero, tb.AccountLinkedEventFailed}},
			{"exists fails the chain", []tb.Account{fresh(linked), again()}, []tb.CreateAccountStatus{tb.AccountLinkedEventFailed, tb.AccountExists}},
			{"linked_event_chain_open", []tb.Account{fresh(linked)}, []tb.CreateAccountStatus{tb.AccountLinkedEventChainOpen}},
			{"linked_event_chain_open fails the chain", []tb.Account{fresh(), fresh(linked), fresh(linked)}, []tb.CreateAccountStatus{tb.AccountCreated, tb.AccountLinkedEventFailed, tb.AccountLinkedEventChainOpen}},
			{"linked_event_chain_open before other failures", []tb.Account{fresh(linked, code0)}, []tb.CreateAccountStatus{tb.AccountLinkedEventChainOpen}},
			{"imported_event_not_expected", []tb.Account{fresh(), fresh(imported(1))}, []tb.CreateAccountStatus{tb.AccountCreated, tb.AccountImportedEventNotExpected}},
			{"imported_event_expected", []tb.Account{fresh(imported(1)), fresh()}, []tb.CreateAccountStatus{tb.AccountImportedEventTimestampMustNotRegress, tb.AccountImportedEventExpected}},
			{"imported_event_timestamp_out_of_range", []tb.Account{fresh(imported(0))}, []tb.CreateAccountStatus{tb.AccountImportedEventTimestampOutOfRange}},
			{"imported_event_timestamp_out_of_range max", []tb.Account{fresh(imported(^uint64(0)))}, []tb.CreateAccountStatus{tb.AccountImportedEventTimestampOutOfRange}},
			{"imported_event_timestamp_out_of_range 2^64-2", []tb.Account{fresh(imported(^uint64(0) - 1))}, []tb.CreateAccountStatus{tb.AccountImportedEventTimestampOutOfRange}},
			{"imported_event_timestamp_out_of_range 2^63", []tb.Account{fresh(imported(1 << 63))}, []tb.CreateAccountStatus{tb.AccountImportedEventTimestampOutOfRange}},
			{"imported_event_timestamp_must_not_advance", []tb.Account{fresh(imported(1<<63 - 1))}, []tb.CreateAccountStatus{tb.AccountImportedEventTimestampMustNotAdvance}},
			{"imported_event_timestamp_must_not_advance before reserved_field", []tb.Account{fresh(imported(1<<63-1), reserved)}, []tb.CreateAccountStatus{tb.AccountImportedEventTimestampMustNotAdvance}},
			{"imported_event_timestamp_must_not_regress", []tb.Account{fresh(imported(1))}, []tb.CreateAccountStatus{tb.AccountImportedEventTimestampMustNotRegress}},
			{"imported exists", []tb.Account{again(func(a *tb.Account) { a.Flags = aImported; a.Timestamp = 1 })}, []tb.CreateAccountStatus{tb.AccountExistsWithDifferentFlags}},
		}
		for _, tt := range tests {
			res, err := f.c.CreateAccounts(tt.batch)
			if err != nil {
				t.Fatalf("%s: CreateAccounts: %v", tt.name, err)
			}
			if g, w := accountStatuses(res), fmt.Sprint(tt.want); g != w {
				t.Errorf("%s: CreateAccounts = %s, want %s", tt.name, g, w)
				continue
			}
			// Every result has a timestamp: exists echoes the account's own, the
			// others are the batch's consecutive timestamps.
			for i, r := range res {
				switch {
				case r.Status == tb.AccountExists:
					if r.Timestamp != got.Timestamp {
						t.Errorf("%s: result %d: timestamp %d, want the account's %d", tt.name, i, r.Timestamp, got.Timestamp)
					}
				case i > 0 && res[i-1].Status != tb.AccountExists && r.Timestamp != res[i-1].Timestamp+1:
					t.Errorf("%s: result %d: timestamp %d, want %d", tt.name, i, r.Timestamp, res[i-1].Timestamp+1)
				case r.Timestamp <= got.Timestamp:
					t.Errorf("%s: result %d: timestamp %d not after the fixture's %d", tt.name, i, r.Timestamp, got.Timestamp)
				}
			}
			// Only created accounts exist, with the result's timestamp.
			for i, a := range tt.batch {
				if a.ID == (tb.Uint128{}) || a.ID == idMax || a.ID == existing.ID {
					continue
				}
				found, err := f.c.LookupAccounts([]tb.Uint128{a.ID})
				if err != nil {
					t.Fatal(err)
				}
				if created := res[i].Status == tb.AccountCreated; created != (len(found) == 1) {
					t.Errorf("%s: account %d: status %v but LookupAccounts found %d", tt.name, i, res[i].Status, len(found))
				} else if created && found[0].Timestamp != res[i].Timestamp {
					t.Errorf("%s: account %d: timestamp %d, result said %d", tt.name, i, found[0].Timestamp, res[i].Timestamp)
				}
			}
		}
	})
}

func TestCreateAccountStored(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		a := f.account(aHistory | aDebitsLimited | aLinked)
		a.UserData128, a.UserData64, a.UserData32, a.Code = u(7), 8, 9, 10
		a2 := f.account(0)
		res := f.createAccounts(a, a2)
		got := f.lookupAccount(a.ID)
		want := a
		want.Timestamp = res[0].Timestamp
		if got != want {
			t.Fatalf("LookupAccounts = %+v, want %+v", got, want)
		}
	})
}

func TestImportedEvents(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		// The newest account's timestamp is a point in the past after which
		// nothing was created yet.
		ref := f.createAccounts(f.account(0))[0].Timestamp
		b.Advance(t, 10*time.Millisecond)

		a := f.account(aImported)
		a.Timestamp = ref + 1
		c := f.account(aImported)
		c.Timestamp = ref + 3
		res := f.createAccounts(a, c)
		if res[0].Timestamp != ref+1 || res[1].Timestamp != ref+3 {
			t.Fatalf("imported accounts: result timestamps %d, %d; want %d, %d", res[0].Timestamp, res[1].Timestamp, ref+1, ref+3)
		}
		if got := f.lookupAccount(c.ID).Timestamp; got != ref+3 {
			t.Fatalf("imported account timestamp %d, want %d", got, ref+3)
		}

		imp := func(dr, cr tb.Uint128, ts uint64) tb.Transfer {
			tr := f.transfer(dr, cr, 5)
			tr.Flags |= fImported
			tr.Timestamp = ts
			return tr
		}
		f.expect([]tb.Transfer{imp(c.ID, a.ID, ref+2)}, tb.TransferImportedEventTimestampMustPostdateDebitAccount)
		f.expect([]tb.Transfer{imp(a.ID, c.ID, ref+2)}, tb.TransferImportedEventTimestampMustPostdateCreditAccount)
		f.expect([]tb.Transfer{imp(a.ID, c.ID, ref+3)}, tb.TransferImportedEventTimestampMustNotRegress) // an account's timestamp
		timed := imp(a.ID, c.ID, ref+4)
		timed.Flags |= fPending
		timed.Timeout = 1
		f.expect([]tb.Transfer{timed}, tb.TransferImportedEventTimeoutMustBeZero)

		t1, t2 := imp(a.ID, c.ID, ref+4), imp(c.ID, a.ID, ref+5)
		plain := f.transfer(a.ID, c.ID, 1)
		res2 := f.expect([]tb.Transfer{t1, t2, plain}, tb.TransferCreated, tb.TransferCreated, tb.TransferImportedEventExpected)
		if res2[0].Timestamp != ref+4 || res2[1].Timestamp != ref+5 {
			t.Fatalf("imported transfers: result timestamps %d, %d; want %d, %d", res2[0].Timestamp, res2[1].Timestamp, ref+4, ref+5)
		}
		if got := f.lookupTransfer(t2.ID).Timestamp; got != ref+5 {
			t.Fatalf("imported transfer timestamp %d, want %d", got, ref+5)
		}
		f.expect([]tb.Transfer{t1}, tb.TransferExists)
		f.expect([]tb.Transfer{imp(a.ID, c.ID, ref+5)}, tb.TransferImportedEventTimestampMustNotRegress)
		f.expect([]tb.Transfer{plain, imp(a.ID, c.ID, ref+6)}, tb.TransferCreated, tb.TransferImportedEventNotExpected)
		f.balance(a.ID, bal{dPost: 6, cPost: 5})
	})
}
