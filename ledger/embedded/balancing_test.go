package embedded_test

import (
	"testing"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/testenv"
)

func TestBalancingTransfers(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(aDebitsLimited, aCreditLimited, 0, 0)
		lim, dlim, a, c := acc[0], acc[1], acc[2], acc[3]
		f.fund(lim, 100)

		// balancing_debit moves at most what the debit account has left.
		small := f.transfer(lim, c, 30)
		small.Flags = fBalancingDr
		all := f.transfer(lim, c, 0)
		all.Flags = fBalancingDr
		all.Amount = amountMax
		none := f.transfer(lim, c, 5)
		none.Flags = fBalancingDr
		f.must(small, all, none)
		for _, tt := range []struct {
			tr   tb.Transfer
			want uint64
		}{{small, 30}, {all, 70}, {none, 0}} {
			if got := f.lookupTransfer(tt.tr.ID).Amount; got != u(tt.want) {
				t.Errorf("balancing_debit stored amount = %v, want %d", got, tt.want)
			}
		}
		f.balance(lim, bal{dPost: 100, cPost: 100})

		// Resubmitted, the amount is an upper limit: anything at least the
		// amount moved exists.
		f.expect([]tb.Transfer{all}, tb.TransferExists)
		again := all
		again.Amount = u(70)
		f.expect([]tb.Transfer{again}, tb.TransferExists)
		again.Amount = u(69)
		f.expect([]tb.Transfer{again}, tb.TransferExistsWithDifferentAmount)

		// balancing_credit moves at most what the credit account may still take.
		f.must(f.transfer(dlim, a, 50))
		credit := f.transfer(a, dlim, 0)
		credit.Flags = fBalancingCr
		credit.Amount = amountMax
		f.must(credit)
		if got := f.lookupTransfer(credit.ID).Amount; got != u(50) {
			t.Errorf("balancing_credit stored amount = %v, want 50", got)
		}
		f.balance(dlim, bal{dPost: 50, cPost: 50})

		// Pending balancing transfers count pending amounts too.
		f.fund(lim, 10)
		p := f.pending(lim, c, 0, 0)
		p.Flags |= fBalancingDr
		p.Amount = amountMax
		p2 := f.pending(lim, c, 0, 0)
		p2.Flags |= fBalancingDr
		p2.Amount = amountMax
		f.must(p, p2)
		if got := f.lookupTransfer(p.ID).Amount; got != u(10) {
			t.Errorf("pending balancing_debit amount = %v, want 10", got)
		}
		if got := f.lookupTransfer(p2.ID).Amount; got != u(0) {
			t.Errorf("second pending balancing_debit amount = %v, want 0", got)
		}
		f.balance(lim, bal{dPend: 10, dPost: 100, cPost: 110})

		// Both flags: the smaller of the two limits.
		both := f.transfer(dlim, lim, 0)
		both.Flags = fBalancingDr | fBalancingCr
		both.Amount = amountMax
		f.must(both)
		if got := f.lookupTransfer(both.ID).Amount; got != u(0) {
			t.Errorf("balancing debit+credit amount = %v, want 0", got)
		}
	})
}

func TestClosingTransfers(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0, 0)
		q, c, d := acc[0], acc[1], acc[2]
		earlier := f.pending(q, c, 5, 0)
		f.must(earlier)

		closing := f.pending(q, d, 0, 0)
		closing.Flags |= fClosingDr
		f.must(closing)
		if !f.lookupAccount(q).AccountFlags().Closed || f.lookupAccount(d).AccountFlags().Closed {
			t.Fatal("closing_debit: want the debit account closed, the credit account open")
		}
		f.expect([]tb.Transfer{f.transfer(q, c, 1)}, tb.TransferDebitAccountAlreadyClosed)
		f.expect([]tb.Transfer{f.transfer(c, q, 1)}, tb.TransferCreditAccountAlreadyClosed)
		f.expect([]tb.Transfer{f.pending(c, q, 1, 0)}, tb.TransferCreditAccountAlreadyClosed)
		// Posting needs open accounts (the closing transfer itself included);
		// voiding does not.
		f.expect([]tb.Transfer{f.resolve(fPost, earlier, u(5))}, tb.TransferDebitAccountAlreadyClosed)
		postClosing := f.resolve(fPost, closing, u(0))
		f.expect([]tb.Transfer{postClosing}, tb.TransferDebitAccountAlreadyClosed)
		f.expect([]tb.Transfer{postClosing}, tb.TransferIDAlreadyFailed)
		f.must(f.resolve(fVoid, earlier, u(0)))
		f.balance(q, bal{})

		// Voiding the closing transfer reopens the account.
		f.must(f.resolve(fVoid, closing, u(0)))
		if f.lookupAccount(q).AccountFlags().Closed {
			t.Fatal("account still closed after voiding the closing transfer")
		}
		f.must(f.transfer(q, c, 1))

		// closing_credit closes the credit account.
		cc := f.pending(c, d, 0, 0)
		cc.Flags |= fClosingCr
		f.must(cc)
		f.expect([]tb.Transfer{f.transfer(q, d, 1)}, tb.TransferCreditAccountAlreadyClosed)
		f.must(f.transfer(q, c, 1))
		// Closing an account that is already closed is refused.
		again := f.pending(q, d, 0, 0)
		again.Flags |= fClosingCr
		f.expect([]tb.Transfer{again}, tb.TransferCreditAccountAlreadyClosed)

		// Created closed: refuses everything.
		closed := f.account(aClosed)
		f.createAccounts(closed)
		f.expect([]tb.Transfer{f.transfer(closed.ID, c, 0), f.transfer(c, closed.ID, 0)},
			tb.TransferDebitAccountAlreadyClosed, tb.TransferCreditAccountAlreadyClosed)
	})
}

func TestOverflows(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0, 0, 0, 0, 0, 0, 0)
		huge := func(t tb.Transfer) tb.Transfer {
			t.Amount = amountMax
			return t
		}
		// Debit side.
		f.must(huge(f.transfer(acc[0], acc[1], 0)))
		f.expect([]tb.Transfer{f.transfer(acc[0], acc[2], 1)}, tb.TransferOverflowsDebitsPosted)
		f.expect([]tb.Transfer{f.pending(acc[0], acc[2], 1, 0)}, tb.TransferOverflowsDebitsPosted)
		f.must(f.pending(acc[0], acc[2], 0, 0)) // amount 0 still fits

		f.must(huge(f.pending(acc[3], acc[4], 0, 0)))
		f.expect([]tb.Transfer{f.pending(acc[3], acc[2], 1, 0)}, tb.TransferOverflowsDebitsPending)
		f.expect([]tb.Transfer{f.transfer(acc[3], acc[2], 1)}, tb.TransferOverflowsDebits)

		// Credit side.
		f.must(huge(f.transfer(acc[5], acc[6], 0)))
		f.expect([]tb.Transfer{f.transfer(acc[2], acc[6], 1)}, tb.TransferOverflowsCreditsPosted)
		f.must(huge(f.pending(acc[2], acc[7], 0, 0)))
		f.expect([]tb.Transfer{f.pending(acc[1], acc[7], 0, 0), f.pending(acc[1], acc[7], 1, 0)},
			tb.TransferCreated, tb.TransferOverflowsCreditsPending)
		f.expect([]tb.Transfer{f.transfer(acc[1], acc[7], 1)}, tb.TransferOverflowsCredits)

		a := f.lookupAccount(acc[0])
		if a.DebitsPosted != amountMax || a.DebitsPending != u(0) {
			t.Fatalf("account after overflows = %+v", a)
		}
	})
}
