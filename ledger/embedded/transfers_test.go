package embedded_test

import (
	"math"
	"testing"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/testenv"
)

func TestCreateTransferStatuses(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		// a, c: unlimited; lim: debits limited, funded with 100; dlim: credits
		// limited, no debits; closed: created closed; other: another ledger.
		acc := f.accounts(0, 0, aDebitsLimited, aCreditLimited, aClosed)
		a, c, lim, dlim, closed := acc[0], acc[1], acc[2], acc[3], acc[4]
		f.fund(lim, 100)
		other := tb.Account{ID: tb.ID(), Ledger: b.NewLedger(), Code: 1}
		f.createAccounts(other)
		plain := f.transfer(a, c, 1)
		f.must(plain)

		type mod func(t *tb.Transfer)
		tr := func(mods ...mod) tb.Transfer {
			x := f.transfer(a, c, 1)
			for _, m := range mods {
				m(&x)
			}
			return x
		}
		var (
			id0      = func(t *tb.Transfer) { t.ID = tb.Uint128{} }
			padding  = func(t *tb.Transfer) { t.Flags |= 1 << 9 }
			ledger0  = func(t *tb.Transfer) { t.Ledger = 0 }
			code0    = func(t *tb.Transfer) { t.Code = 0 }
			flags    = func(fl uint16) mod { return func(t *tb.Transfer) { t.Flags |= fl } }
			dr       = func(id tb.Uint128) mod { return func(t *tb.Transfer) { t.DebitAccountID = id } }
			cr       = func(id tb.Uint128) mod { return func(t *tb.Transfer) { t.CreditAccountID = id } }
			amount   = func(n uint64) mod { return func(t *tb.Transfer) { t.Amount = u(n) } }
			pendID   = func(id tb.Uint128) mod { return func(t *tb.Transfer) { t.PendingID = id } }
			timeout  = func(s uint32) mod { return func(t *tb.Transfer) { t.Timeout = s } }
			missing  = tb.ID()
			selfPend = func(t *tb.Transfer) { t.PendingID = t.ID }
		)
		tests := []struct {
			name string
			tr   tb.Transfer
			want tb.CreateTransferStatus
		}{
			{"created", tr(), tb.TransferCreated},
			{"amount 0", tr(amount(0)), tb.TransferCreated},
			{"pending amount 0", tr(amount(0), flags(fPending)), tb.TransferCreated},
			{"pending without timeout", tr(flags(fPending)), tb.TransferCreated},
			{"pending with the longest timeout", tr(flags(fPending), timeout(math.MaxUint32)), tb.TransferCreated},
			{"timestamp_must_be_zero before reserved_flag", tr(func(t *tb.Transfer) { t.Timestamp = 1 }, padding), tb.TransferTimestampMustBeZero},
			{"reserved_flag before id_must_not_be_zero", tr(padding, id0), tb.TransferReservedFlag},
			{"id_must_not_be_zero before ledger_must_not_be_zero", tr(id0, ledger0), tb.TransferIDMustNotBeZero},
			{"id_must_not_be_int_max", tr(func(t *tb.Transfer) { t.ID = idMax }), tb.TransferIDMustNotBeIntMax},
			{"flags_are_mutually_exclusive post+void", tr(flags(fPost|fVoid), pendID(missing)), tb.TransferFlagsAreMutuallyExclusive},
			{"flags_are_mutually_exclusive pending+post", tr(flags(fPending|fPost), pendID(missing)), tb.TransferFlagsAreMutuallyExclusive},
			{"flags_are_mutually_exclusive post+balancing", tr(flags(fPost|fBalancingDr), pendID(missing)), tb.TransferFlagsAreMutuallyExclusive},
			{"flags_are_mutually_exclusive void+closing", tr(flags(fVoid|fClosingCr), pendID(missing)), tb.TransferFlagsAreMutuallyExclusive},
			{"flags_are_mutually_exclusive before pending_id_must_not_be_zero", tr(flags(fVoid | fBalancingCr)), tb.TransferFlagsAreMutuallyExclusive},
			{"debit_account_id_must_not_be_zero before credit", tr(dr(tb.Uint128{}), cr(tb.Uint128{})), tb.TransferDebitAccountIDMustNotBeZero},
			{"debit_account_id_must_not_be_int_max", tr(dr(idMax)), tb.TransferDebitAccountIDMustNotBeIntMax},
			{"credit_account_id_must_not_be_zero", tr(cr(tb.Uint128{})), tb.TransferCreditAccountIDMustNotBeZero},
			{"credit_account_id_must_not_be_int_max", tr(cr(idMax)), tb.TransferCreditAccountIDMustNotBeIntMax},
			{"accounts_must_be_different before ledger_must_not_be_zero", tr(cr(a), ledger0), tb.TransferAccountsMustBeDifferent},
			{"pending_id_must_be_zero", tr(pendID(missing)), tb.TransferPendingIDMustBeZero},
			{"pending_id_must_not_be_zero", tr(flags(fPost)), tb.TransferPendingIDMustNotBeZero},
			{"pending_id_must_not_be_int_max", tr(flags(fVoid), pendID(idMax)), tb.TransferPendingIDMustNotBeIntMax},
			{"pending_id_must_be_different", tr(flags(fPost), selfPend), tb.TransferPendingIDMustBeDifferent},
			{"timeout_reserved_for_pending_transfer", tr(timeout(1)), tb.TransferTimeoutReservedForPendingTransfer},
			{"timeout_reserved_for_pending_transfer on post", tr(flags(fPost), pendID(missing), timeout(1)), tb.TransferTimeoutReservedForPendingTransfer},
			{"closing_transfer_must_be_pending", tr(flags(fClosingDr)), tb.TransferClosingTransferMustBePending},
			{"closing_transfer_must_be_pending before ledger_must_not_be_zero", tr(flags(fClosingCr), ledger0), tb.TransferClosingTransferMustBePending},
			{"ledger_must_not_be_zero before code_must_not_be_zero", tr(ledger0, code0), tb.TransferLedgerMustNotBeZero},
			{"code_must_not_be_zero before debit_account_not_found", tr(code0, dr(missing)), tb.TransferCodeMustNotBeZero},
			{"debit_account_not_found before credit", tr(dr(missing), cr(tb.ID())), tb.TransferDebitAccountNotFound},
			{"credit_account_not_found", tr(cr(missing)), tb.TransferCreditAccountNotFound},
			{"accounts_must_have_the_same_ledger", tr(cr(other.ID)), tb.TransferAccountsMustHaveTheSameLedger},
			{"transfer_must_have_the_same_ledger_as_accounts", tr(func(t *tb.Transfer) { t.Ledger = other.Ledger }), tb.TransferTransferMustHaveTheSameLedgerAsAccounts},
			{"pending_transfer_not_found", tr(flags(fPost), pendID(missing), dr(tb.Uint128{}), cr(tb.Uint128{})), tb.TransferPendingTransferNotFound},
			{"pending_transfer_not_pending", tr(flags(fPost), pendID(plain.ID)), tb.TransferPendingTransferNotPending},
			{"debit_account_already_closed", tr(dr(closed)), tb.TransferDebitAccountAlreadyClosed},
			{"credit_account_already_closed", tr(cr(closed)), tb.TransferCreditAccountAlreadyClosed},
			{"credit_account_already_closed before exceeds_credits", tr(dr(lim), cr(closed), amount(1000)), tb.TransferCreditAccountAlreadyClosed},
			{"exceeds_credits", tr(dr(lim), amount(101)), tb.TransferExceedsCredits},
			{"exceeds_credits pending", tr(dr(lim), amount(101), flags(fPending)), tb.TransferExceedsCredits},
			{"exceeds_credits before exceeds_debits", tr(dr(lim), cr(dlim), amount(1000)), tb.TransferExceedsCredits},
			{"exceeds_debits", tr(cr(dlim)), tb.TransferExceedsDebits},
			{"within the limit", tr(dr(lim), amount(100)), tb.TransferCreated},
		}
		for _, tt := range tests {
			res := f.create(tt.tr)
			if res[0].Status != tt.want {
				t.Errorf("%s: CreateTransfers = %v, want %v", tt.name, res[0].Status, tt.want)
			}
		}
		// Limits hold: lim spent exactly its 100; dlim received nothing.
		f.balance(lim, bal{dPost: 100, cPost: 100})
		f.balance(dlim, bal{})
	})
}
