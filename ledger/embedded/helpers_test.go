package embedded_test

import (
	"fmt"
	"testing"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/testenv"
)

// Flags as raw values, to keep the tables short.
var (
	fLinked        = tb.TransferFlags{Linked: true}.ToUint16()
	fPending       = tb.TransferFlags{Pending: true}.ToUint16()
	fPost          = tb.TransferFlags{PostPendingTransfer: true}.ToUint16()
	fVoid          = tb.TransferFlags{VoidPendingTransfer: true}.ToUint16()
	fBalancingDr   = tb.TransferFlags{BalancingDebit: true}.ToUint16()
	fBalancingCr   = tb.TransferFlags{BalancingCredit: true}.ToUint16()
	fClosingDr     = tb.TransferFlags{ClosingDebit: true}.ToUint16()
	fClosingCr     = tb.TransferFlags{ClosingCredit: true}.ToUint16()
	fImported      = tb.TransferFlags{Imported: true}.ToUint16()
	aLinked        = tb.AccountFlags{Linked: true}.ToUint16()
	aDebitsLimited = tb.AccountFlags{DebitsMustNotExceedCredits: true}.ToUint16()
	aCreditLimited = tb.AccountFlags{CreditsMustNotExceedDebits: true}.ToUint16()
	aHistory       = tb.AccountFlags{History: true}.ToUint16()
	aImported      = tb.AccountFlags{Imported: true}.ToUint16()
	aClosed        = tb.AccountFlags{Closed: true}.ToUint16()

	amountMax = tb.AmountMax
	idMax     = tb.AmountMax
)

func u(n uint64) tb.Uint128 { return tb.ToUint128(n) }

// fixture creates accounts and transfers on one ledger of a backend.
type fixture struct {
	t      *testing.T
	c      tb.Client
	ledger uint32
}

func newFixture(t *testing.T, b *testenv.Backend) *fixture {
	return &fixture{t: t, c: b.Client, ledger: b.NewLedger()}
}

// account returns an unsaved account on the fixture's ledger.
func (f *fixture) account(flags uint16) tb.Account {
	return tb.Account{ID: tb.ID(), Ledger: f.ledger, Code: 1, Flags: flags}
}

// accounts creates one account per flags value and returns their IDs.
func (f *fixture) accounts(flags ...uint16) []tb.Uint128 {
	f.t.Helper()
	batch := make([]tb.Account, len(flags))
	ids := make([]tb.Uint128, len(flags))
	for i, fl := range flags {
		batch[i] = f.account(fl)
		ids[i] = batch[i].ID
	}
	f.createAccounts(batch...)
	return ids
}

func (f *fixture) createAccounts(accounts ...tb.Account) []tb.CreateAccountResult {
	f.t.Helper()
	res, err := f.c.CreateAccounts(accounts)
	if err != nil {
		f.t.Fatalf("CreateAccounts(%d accounts): %v", len(accounts), err)
	}
	for i, r := range res {
		if r.Status != tb.AccountCreated {
			f.t.Fatalf("CreateAccounts: account %d: %v, want AccountCreated", i, r.Status)
		}
	}
	return res
}

// transfer returns an unsaved plain transfer of amount on the fixture's ledger.
func (f *fixture) transfer(dr, cr tb.Uint128, amount uint64) tb.Transfer {
	return tb.Transfer{ID: tb.ID(), DebitAccountID: dr, CreditAccountID: cr, Amount: u(amount), Ledger: f.ledger, Code: 1}
}

// pending returns an unsaved pending transfer.
func (f *fixture) pending(dr, cr tb.Uint128, amount uint64, timeout uint32) tb.Transfer {
	t := f.transfer(dr, cr, amount)
	t.Flags = fPending
	t.Timeout = timeout
	return t
}

// post returns an unsaved transfer posting (or, with fVoid, voiding) p.
func (f *fixture) resolve(flag uint16, p tb.Transfer, amount tb.Uint128) tb.Transfer {
	return tb.Transfer{ID: tb.ID(), PendingID: p.ID, Amount: amount, Flags: flag}
}

// create sends transfers in one request and returns the results.
func (f *fixture) create(transfers ...tb.Transfer) []tb.CreateTransferResult {
	f.t.Helper()
	res, err := f.c.CreateTransfers(transfers)
	if err != nil {
		f.t.Fatalf("CreateTransfers(%d transfers): %v", len(transfers), err)
	}
	if len(res) != len(transfers) {
		f.t.Fatalf("CreateTransfers(%d transfers) = %d results", len(transfers), len(res))
	}
	return res
}

// expect sends transfers in one request and checks the statuses.
func (f *fixture) expect(transfers []tb.Transfer, want ...tb.CreateTransferStatus) []tb.CreateTransferResult {
	f.t.Helper()
	res := f.create(transfers...)
	checkStatuses(f.t, res, want...)
	return res
}

// must creates transfers that must all succeed.
func (f *fixture) must(transfers ...tb.Transfer) []tb.CreateTransferResult {
	f.t.Helper()
	want := make([]tb.CreateTransferStatus, len(transfers))
	for i := range want {
		want[i] = tb.TransferCreated
	}
	return f.expect(transfers, want...)
}

func checkStatuses(t *testing.T, res []tb.CreateTransferResult, want ...tb.CreateTransferStatus) {
	t.Helper()
	got := make([]tb.CreateTransferStatus, len(res))
	for i, r := range res {
		got[i] = r.Status
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("CreateTransfers statuses = %v, want %v", got, want)
	}
}

func (f *fixture) lookupAccount(id tb.Uint128) tb.Account {
	f.t.Helper()
	got, err := f.c.LookupAccounts([]tb.Uint128{id})
	if err != nil || len(got) != 1 {
		f.t.Fatalf("LookupAccounts(%v) = %d accounts, %v; want 1", id, len(got), err)
	}
	return got[0]
}

func (f *fixture) lookupTransfer(id tb.Uint128) tb.Transfer {
	f.t.Helper()
	got, err := f.c.LookupTransfers([]tb.Uint128{id})
	if err != nil || len(got) != 1 {
		f.t.Fatalf("LookupTransfers(%v) = %d transfers, %v; want 1", id, len(got), err)
	}
	return got[0]
}

// transferMissing checks that no transfer has this ID.
func (f *fixture) transferMissing(id tb.Uint128) {
	f.t.Helper()
	got, err := f.c.LookupTransfers([]tb.Uint128{id})
	if err != nil || len(got) != 0 {
		f.t.Fatalf("LookupTransfers(%v) = %v, %v; want none", id, got, err)
	}
}

// bal is an account's four balances.
type bal struct{ dPend, dPost, cPend, cPost uint64 }

func (b bal) String() string {
	return fmt.Sprintf("{debits pending %d posted %d, credits pending %d posted %d}", b.dPend, b.dPost, b.cPend, b.cPost)
}

func lo(v tb.Uint128) uint64 {
	l, h := v.Uint64()
	if h != 0 {
		return ^uint64(0)
	}
	return l
}

func balOf(a tb.Account) bal {
	return bal{lo(a.DebitsPending), lo(a.DebitsPosted), lo(a.CreditsPending), lo(a.CreditsPosted)}
}

func balOfBalance(a tb.AccountBalance) bal {
	return bal{lo(a.DebitsPending), lo(a.DebitsPosted), lo(a.CreditsPending), lo(a.CreditsPosted)}
}

// balance checks an account's balances.
func (f *fixture) balance(id tb.Uint128, want bal) {
	f.t.Helper()
	if got := balOf(f.lookupAccount(id)); got != want {
		f.t.Fatalf("account balances = %v, want %v", got, want)
	}
}

// fund credits an account with amount from a fresh, unlimited account.
func (f *fixture) fund(id tb.Uint128, amount uint64) {
	f.t.Helper()
	src := f.accounts(0)[0]
	f.must(f.transfer(src, id, amount))
}
