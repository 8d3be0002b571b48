package embedded_test

import (
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/testenv"
)

func TestResubmitTransfer(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0, 0)
		a, c, d := acc[0], acc[1], acc[2]
		orig := f.pending(a, c, 10, 3600)
		orig.UserData128, orig.UserData64, orig.UserData32, orig.Code = u(1), 2, 3, 4
		first := f.must(orig)[0]

		type mod func(t *tb.Transfer)
		again := func(mods ...mod) tb.Transfer {
			x := orig
			for _, m := range mods {
				m(&x)
			}
			return x
		}
		var (
			flags   = func(t *tb.Transfer) { t.Flags = 0 }
			pending = func(t *tb.Transfer) { t.PendingID = u(1) }
			timeout = func(t *tb.Transfer) { t.Timeout = 1 }
			dr      = func(t *tb.Transfer) { t.DebitAccountID = d }
			cr      = func(t *tb.Transfer) { t.CreditAccountID = d }
			amount  = func(t *tb.Transfer) { t.Amount = u(11) }
			ud128   = func(t *tb.Transfer) { t.UserData128 = u(9) }
			ud64    = func(t *tb.Transfer) { t.UserData64 = 9 }
			ud32    = func(t *tb.Transfer) { t.UserData32 = 9 }
			ledger  = func(t *tb.Transfer) { t.Ledger = 0 }
			code    = func(t *tb.Transfer) { t.Code = 9 }
		)
		tests := []struct {
			name string
			tr   tb.Transfer
			want tb.CreateTransferStatus
		}{
			{"exists", again(), tb.TransferExists},
			{"flags", again(flags, pending), tb.TransferExistsWithDifferentFlags},
			{"pending_id", again(pending, timeout), tb.TransferExistsWithDifferentPendingID},
			{"timeout", again(timeout, dr), tb.TransferExistsWithDifferentTimeout},
			{"debit_account_id", again(dr, cr), tb.TransferExistsWithDifferentDebitAccountID},
			{"credit_account_id", again(cr, amount), tb.TransferExistsWithDifferentCreditAccountID},
			{"amount", again(amount, ud128), tb.TransferExistsWithDifferentAmount},
			{"user_data_128", again(ud128, ud64), tb.TransferExistsWithDifferentUserData128},
			{"user_data_64", again(ud64, ud32), tb.TransferExistsWithDifferentUserData64},
			{"user_data_32", again(ud32, ledger), tb.TransferExistsWithDifferentUserData32},
			{"ledger (zero: before ledger_must_not_be_zero)", again(ledger, code), tb.TransferExistsWithDifferentLedger},
			{"code", again(code), tb.TransferExistsWithDifferentCode},
		}
		for _, tt := range tests {
			res := f.create(tt.tr)[0]
			if res.Status != tt.want {
				t.Errorf("%s: CreateTransfers = %v, want %v", tt.name, res.Status, tt.want)
			}
			// exists echoes the original timestamp; the others get a new one.
			if tt.want == tb.TransferExists && res.Timestamp != first.Timestamp {
				t.Errorf("%s: timestamp %d, want the original %d", tt.name, res.Timestamp, first.Timestamp)
			}
			if tt.want != tb.TransferExists && res.Timestamp <= first.Timestamp {
				t.Errorf("%s: timestamp %d, want one after the original %d", tt.name, res.Timestamp, first.Timestamp)
			}
		}
		f.balance(a, bal{dPend: 10})

		// A post or void resubmitted with its zero fields still zero exists.
		post := f.resolve(fPost, orig, amountMax)
		f.must(post)
		postAgain := func(mods ...mod) tb.Transfer {
			x := post
			for _, m := range mods {
				m(&x)
			}
			return x
		}
		resolveTests := []struct {
			name string
			tr   tb.Transfer
			want tb.CreateTransferStatus
		}{
			{"exists", postAgain(), tb.TransferExists},
			{"exists with the defaults spelled out", postAgain(func(t *tb.Transfer) {
				t.DebitAccountID, t.CreditAccountID, t.Amount = a, c, u(10)
				t.UserData128, t.UserData64, t.UserData32, t.Ledger, t.Code = u(1), 2, 3, f.ledger, 4
			}), tb.TransferExists},
			{"debit_account_id", postAgain(dr), tb.TransferExistsWithDifferentDebitAccountID},
			{"credit_account_id", postAgain(cr), tb.TransferExistsWithDifferentCreditAccountID},
			{"amount", postAgain(func(t *tb.Transfer) { t.Amount = u(9) }), tb.TransferExistsWithDifferentAmount},
			{"user_data_128", postAgain(ud128), tb.TransferExistsWithDifferentUserData128},
			{"user_data_64", postAgain(ud64), tb.TransferExistsWithDifferentUserData64},
			{"user_data_32", postAgain(ud32), tb.TransferExistsWithDifferentUserData32},
			{"ledger", postAgain(func(t *tb.Transfer) { t.Ledger = f.ledger + 1 }), tb.TransferExistsWithDifferentLedger},
			{"code", postAgain(code), tb.TransferExistsWithDifferentCode},
			{"flags", postAgain(func(t *tb.Transfer) { t.Flags = fVoid }), tb.TransferExistsWithDifferentFlags},
		}
		for _, tt := range resolveTests {
			if got := f.create(tt.tr)[0].Status; got != tt.want {
				t.Errorf("post %s: CreateTransfers = %v, want %v", tt.name, got, tt.want)
			}
		}
		f.balance(a, bal{dPost: 10})
	})
}

// TestRetryAfterFailure checks which failures use up a transfer's ID.
func TestRetryAfterFailure(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0, aDebitsLimited, aCreditLimited, aClosed, 0, 0)
		a, c, lim, dlim, closed, ov1, ov2 := acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6]
		missing := tb.ID()
		posted := f.pending(a, c, 5, 0)
		big := f.transfer(ov1, ov2, 0)
		big.Amount = amountMax
		f.must(posted, f.resolve(fPost, posted, u(5)), big)

		// A transient failure: the same ID answers id_already_failed for ever,
		// even once the transfer would succeed, and before most validation.
		transient := []struct {
			name string
			tr   tb.Transfer
			want tb.CreateTransferStatus
		}{
			{"exceeds_credits", f.transfer(lim, c, 1), tb.TransferExceedsCredits},
			{"exceeds_debits", f.transfer(a, dlim, 1), tb.TransferExceedsDebits},
			{"debit_account_not_found", f.transfer(missing, c, 1), tb.TransferDebitAccountNotFound},
			{"credit_account_not_found", f.transfer(a, missing, 1), tb.TransferCreditAccountNotFound},
			{"pending_transfer_not_found", tb.Transfer{ID: tb.ID(), PendingID: missing, Flags: fPost}, tb.TransferPendingTransferNotFound},
			{"debit_account_already_closed", f.transfer(closed, c, 1), tb.TransferDebitAccountAlreadyClosed},
			{"credit_account_already_closed", f.transfer(a, closed, 1), tb.TransferCreditAccountAlreadyClosed},
		}
		for _, tt := range transient {
			first := f.create(tt.tr)[0]
			if first.Status != tt.want {
				t.Errorf("%s: CreateTransfers = %v, want %v", tt.name, first.Status, tt.want)
				continue
			}
			retry := f.create(tt.tr)[0]
			if retry.Status != tb.TransferIDAlreadyFailed || retry.Timestamp <= first.Timestamp {
				t.Errorf("%s: retry = %+v, want id_already_failed with a new timestamp after %d", tt.name, retry, first.Timestamp)
			}
			fixed := f.transfer(a, c, 1)
			fixed.ID = tt.tr.ID
			fixed.Ledger = 0
			if got := f.create(fixed)[0].Status; got != tb.TransferIDAlreadyFailed {
				t.Errorf("%s: retry with another body = %v, want id_already_failed", tt.name, got)
			}
			fixed.Flags = 1 << 9
			if got := f.create(fixed)[0].Status; got != tb.TransferReservedFlag {
				t.Errorf("%s: retry with a reserved flag = %v, want reserved_flag", tt.name, got)
			}
			f.transferMissing(tt.tr.ID)
		}

		// Any other failure: the same transfer fails the same way again, and
		// the ID stays usable.
		pendingAgain := f.pending(ov1, ov2, 1, 0)
		lateOverflow := f.transfer(ov1, ov2, 1)
		permanent := []struct {
			name string
			tr   tb.Transfer
			want tb.CreateTransferStatus
		}{
			{"accounts_must_be_different", f.transfer(a, a, 1), tb.TransferAccountsMustBeDifferent},
			{"ledger_must_not_be_zero", func() tb.Transfer { x := f.transfer(a, c, 1); x.Ledger = 0; return x }(), tb.TransferLedgerMustNotBeZero},
			{"pending_transfer_already_posted", f.resolve(fVoid, posted, u(0)), tb.TransferPendingTransferAlreadyPosted},
			{"exceeds_pending_transfer_amount", f.resolve(fPost, posted, u(6)), tb.TransferExceedsPendingTransferAmount},
			{"overflows_debits_posted", lateOverflow, tb.TransferOverflowsDebitsPosted},
			{"overflows_debits_posted (pending)", pendingAgain, tb.TransferOverflowsDebitsPosted},
		}
		for _, tt := range permanent {
			for try := range 2 {
				if got := f.create(tt.tr)[0].Status; got != tt.want {
					t.Errorf("%s: try %d: CreateTransfers = %v, want %v", tt.name, try, got, tt.want)
				}
			}
			fixed := f.transfer(c, a, 1)
			fixed.ID = tt.tr.ID
			if got := f.create(fixed)[0].Status; got != tb.TransferCreated {
				t.Errorf("%s: the ID with a valid transfer = %v, want created", tt.name, got)
			}
		}
	})
}

func TestRetryAfterExpiry(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		p := f.pending(acc[0], acc[1], 1, 1)
		f.must(p)
		b.Advance(t, 2*time.Second)
		post := f.resolve(fPost, p, u(0))
		f.expect([]tb.Transfer{post}, tb.TransferPendingTransferExpired)
		f.expect([]tb.Transfer{post}, tb.TransferPendingTransferExpired)
		fixed := f.transfer(acc[0], acc[1], 1)
		fixed.ID = post.ID
		f.must(fixed)
	})
}
