package embedded_test

import (
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/testenv"
)

func TestPostVoidStatuses(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		a, c := acc[0], acc[1]
		p := f.pending(a, c, 10, 3600)
		p.Code, p.UserData128, p.UserData64, p.UserData32 = 2, u(7), 8, 9
		plain := f.transfer(a, c, 1)
		f.must(p, plain)

		type mod func(t *tb.Transfer)
		post := func(mods ...mod) tb.Transfer {
			x := f.resolve(fPost, p, u(10))
			for _, m := range mods {
				m(&x)
			}
			return x
		}
		var (
			void    = func(t *tb.Transfer) { t.Flags = fVoid }
			amount  = func(n uint64) mod { return func(t *tb.Transfer) { t.Amount = u(n) } }
			dr      = func(id tb.Uint128) mod { return func(t *tb.Transfer) { t.DebitAccountID = id } }
			cr      = func(id tb.Uint128) mod { return func(t *tb.Transfer) { t.CreditAccountID = id } }
			code    = func(c uint16) mod { return func(t *tb.Transfer) { t.Code = c } }
			ledger  = func(l uint32) mod { return func(t *tb.Transfer) { t.Ledger = l } }
			pending = func(id tb.Uint128) mod { return func(t *tb.Transfer) { t.PendingID = id } }
		)
		tests := []struct {
			name string
			tr   tb.Transfer
			want tb.CreateTransferStatus
		}{
			{"pending_transfer_not_pending", post(pending(plain.ID)), tb.TransferPendingTransferNotPending},
			{"pending_transfer_has_different_debit_account_id", post(dr(c)), tb.TransferPendingTransferHasDifferentDebitAccountID},
			{"pending_transfer_has_different_debit_account_id before code", post(dr(c), code(3)), tb.TransferPendingTransferHasDifferentDebitAccountID},
			{"pending_transfer_has_different_credit_account_id", post(cr(a), ledger(f.ledger+1)), tb.TransferPendingTransferHasDifferentCreditAccountID},
			{"pending_transfer_has_different_ledger", post(ledger(f.ledger+1), code(3)), tb.TransferPendingTransferHasDifferentLedger},
			{"pending_transfer_has_different_code before exceeds_pending_transfer_amount", post(code(3), amount(11)), tb.TransferPendingTransferHasDifferentCode},
			{"exceeds_pending_transfer_amount", post(amount(11)), tb.TransferExceedsPendingTransferAmount},
			{"exceeds_pending_transfer_amount on void", post(void, amount(11)), tb.TransferExceedsPendingTransferAmount},
			{"pending_transfer_has_different_amount", post(void, amount(9)), tb.TransferPendingTransferHasDifferentAmount},
		}
		for _, tt := range tests {
			if got := f.create(tt.tr)[0].Status; got != tt.want {
				t.Errorf("%s: CreateTransfers = %v, want %v", tt.name, got, tt.want)
			}
		}
		f.balance(a, bal{dPend: 10, dPost: 1})

		// A partial post moves its amount and releases the rest.
		ok := post(amount(4), dr(a), cr(c), ledger(f.ledger), code(2))
		res := f.must(ok)
		f.balance(a, bal{dPost: 5})
		f.balance(c, bal{cPost: 5})
		got := f.lookupTransfer(ok.ID)
		want := tb.Transfer{
			ID: ok.ID, DebitAccountID: a, CreditAccountID: c, Amount: u(4), PendingID: p.ID,
			UserData128: u(7), UserData64: 8, UserData32: 9, Ledger: f.ledger, Code: 2,
			Flags: fPost, Timestamp: res[0].Timestamp,
		}
		if got != want {
			t.Fatalf("stored post = %+v, want %+v", got, want)
		}
		if got := f.lookupTransfer(p.ID); got.Amount != u(10) || got.Flags != fPending {
			t.Fatalf("pending transfer after post = %+v, want unchanged", got)
		}

		after := []struct {
			name string
			tr   tb.Transfer
			want tb.CreateTransferStatus
		}{
			{"pending_transfer_already_posted", post(), tb.TransferPendingTransferAlreadyPosted},
			{"pending_transfer_already_posted on void", post(void, amount(0)), tb.TransferPendingTransferAlreadyPosted},
			{"exceeds_pending_transfer_amount before already_posted", post(amount(11)), tb.TransferExceedsPendingTransferAmount},
			{"pending_transfer_has_different_amount before already_posted", post(void, amount(3)), tb.TransferPendingTransferHasDifferentAmount},
		}
		for _, tt := range after {
			if got := f.create(tt.tr)[0].Status; got != tt.want {
				t.Errorf("%s: CreateTransfers = %v, want %v", tt.name, got, tt.want)
			}
		}
	})
}

func TestPostAndVoidAmounts(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		a, c := acc[0], acc[1]
		p1, p2, p3, p4, p5 := f.pending(a, c, 10, 0), f.pending(a, c, 20, 0), f.pending(a, c, 30, 0), f.pending(a, c, 40, 60), f.pending(a, c, 50, 60)
		f.must(p1, p2, p3, p4, p5)
		f.balance(a, bal{dPend: 150})

		postZero := f.resolve(fPost, p1, u(0))     // posts 0, releases 10
		postMax := f.resolve(fPost, p2, amountMax) // posts the full 20
		postExact := f.resolve(fPost, p3, u(30))
		voidZero := f.resolve(fVoid, p4, u(0)) // stored with the full 40
		voidExact := f.resolve(fVoid, p5, u(50))
		f.must(postZero, postMax, postExact, voidZero, voidExact)
		f.balance(a, bal{dPost: 50})
		f.balance(c, bal{cPost: 50})
		for _, tt := range []struct {
			tr   tb.Transfer
			want uint64
		}{{postZero, 0}, {postMax, 20}, {postExact, 30}, {voidZero, 40}, {voidExact, 50}} {
			if got := f.lookupTransfer(tt.tr.ID); got.Amount != u(tt.want) {
				t.Errorf("stored amount of %v = %v, want %d", tt.tr, got.Amount, tt.want)
			}
		}
		f.expect([]tb.Transfer{f.resolve(fPost, p4, u(0))}, tb.TransferPendingTransferAlreadyVoided)
		f.expect([]tb.Transfer{f.resolve(fVoid, p1, u(0))}, tb.TransferPendingTransferAlreadyPosted)

		// Posting and voiding in the same request as the pending transfer.
		p6, p7 := f.pending(a, c, 5, 0), f.pending(a, c, 6, 0)
		f.must(p6, f.resolve(fPost, p6, amountMax), p7, f.resolve(fVoid, p7, u(0)))
		f.balance(a, bal{dPost: 55})
	})
}

func TestExpiry(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(aDebitsLimited|aHistory, 0)
		user, op := acc[0], acc[1]
		f.fund(user, 1)

		p1 := f.pending(user, op, 1, 1)
		f.must(p1)
		f.expect([]tb.Transfer{f.pending(user, op, 1, 1)}, tb.TransferExceedsCredits)
		f.balance(user, bal{dPend: 1, cPost: 1})

		b.Advance(t, 2*time.Second)
		f.balance(user, bal{cPost: 1})
		if got := f.lookupTransfer(p1.ID); got.Flags != fPending || got.Amount != u(1) || got.Timeout != 1 {
			t.Fatalf("expired transfer = %+v, want the pending transfer unchanged", got)
		}

		// Post and void answer pending_transfer_expired, after the amount checks;
		// their IDs stay usable.
		post := f.resolve(fPost, p1, u(1))
		f.expect([]tb.Transfer{post}, tb.TransferPendingTransferExpired)
		f.expect([]tb.Transfer{post}, tb.TransferPendingTransferExpired)
		f.expect([]tb.Transfer{f.resolve(fVoid, p1, u(0))}, tb.TransferPendingTransferExpired)
		f.expect([]tb.Transfer{f.resolve(fVoid, p1, u(2))}, tb.TransferExceedsPendingTransferAmount)
		f.expect([]tb.Transfer{f.resolve(fPost, p1, u(2))}, tb.TransferExceedsPendingTransferAmount)
		f.transferMissing(post.ID)

		// The released unit can be reserved again.
		p2 := f.pending(user, op, 1, 1)
		f.must(p2)
		f.balance(user, bal{dPend: 1, cPost: 1})

		// Expiry is no transfer: it adds no balance history entry.
		balances, err := f.c.GetAccountBalances(tb.AccountFilter{AccountID: user, Limit: 10, Flags: tb.AccountFilterFlags{Debits: true, Credits: true}.ToUint32()})
		if err != nil {
			t.Fatal(err)
		}
		want := []bal{{cPost: 1}, {dPend: 1, cPost: 1}, {dPend: 1, cPost: 1}}
		if len(balances) != len(want) {
			t.Fatalf("GetAccountBalances = %d entries, want %d", len(balances), len(want))
		}
		for i, w := range want {
			if got := balOfBalance(balances[i]); got != w {
				t.Errorf("GetAccountBalances[%d] = %v, want %v", i, got, w)
			}
		}
		transfers, err := f.c.GetAccountTransfers(tb.AccountFilter{AccountID: user, Limit: 10, Flags: tb.AccountFilterFlags{Debits: true, Credits: true}.ToUint32()})
		if err != nil || len(transfers) != 3 {
			t.Fatalf("GetAccountTransfers = %d transfers, %v; want 3", len(transfers), err)
		}
	})
}

func TestExpiryVoidWithWrongAmount(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		p := f.pending(acc[0], acc[1], 5, 1)
		f.must(p)
		b.Advance(t, 2*time.Second)
		f.expect([]tb.Transfer{f.resolve(fVoid, p, u(4))}, tb.TransferPendingTransferHasDifferentAmount)
		f.balance(acc[0], bal{})
	})
}

func TestExpiryReopensClosedAccount(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		a, c := acc[0], acc[1]
		closing := f.pending(a, c, 0, 1)
		closing.Flags |= fClosingDr | fClosingCr
		f.must(closing)
		if fl := f.lookupAccount(a).AccountFlags(); !fl.Closed {
			t.Fatalf("account flags after a closing transfer = %+v, want closed", fl)
		}
		f.expect([]tb.Transfer{f.transfer(a, c, 1)}, tb.TransferDebitAccountAlreadyClosed)
		b.Advance(t, 2*time.Second)
		if f.lookupAccount(a).AccountFlags().Closed || f.lookupAccount(c).AccountFlags().Closed {
			t.Fatal("accounts still closed after the closing transfer expired")
		}
		f.must(f.transfer(a, c, 1))
	})
}
