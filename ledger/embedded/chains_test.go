package embedded_test

import (
	"testing"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/testenv"
)

func linked(t tb.Transfer) tb.Transfer {
	t.Flags |= fLinked
	return t
}

func TestLinkedChainRollback(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0, aDebitsLimited|aHistory)
		a, c, lim := acc[0], acc[1], acc[2]
		f.fund(lim, 10)
		p := f.pending(a, c, 7, 0)
		f.must(p)
		before := []tb.Account{f.lookupAccount(a), f.lookupAccount(c), f.lookupAccount(lim)}

		// Every kind of change in a chain that then fails: plain, pending,
		// post, closing. The first failing event has its own status, the
		// others linked_event_failed.
		t1 := linked(f.transfer(a, c, 10))
		t2 := linked(f.pending(c, a, 5, 60))
		t3 := linked(f.resolve(fPost, p, u(3)))
		t4 := linked(f.pending(c, a, 4, 0))
		t4.Flags |= fClosingCr               // closes a
		t5 := linked(f.transfer(lim, c, 11)) // exceeds_credits: fails the chain
		t6 := f.transfer(a, c, 1)
		res := f.expect([]tb.Transfer{t1, t2, t3, t4, t5, t6},
			tb.TransferLinkedEventFailed, tb.TransferLinkedEventFailed, tb.TransferLinkedEventFailed,
			tb.TransferLinkedEventFailed, tb.TransferExceedsCredits, tb.TransferLinkedEventFailed)
		for i := 1; i < len(res); i++ {
			if res[i].Timestamp != res[i-1].Timestamp+1 {
				t.Fatalf("result timestamps %d, %d: want consecutive", res[i-1].Timestamp, res[i].Timestamp)
			}
		}
		for i, id := range []tb.Uint128{a, c, lim} {
			if got := f.lookupAccount(id); got != before[i] {
				t.Fatalf("account %d after the failed chain = %+v, want %+v", i, got, before[i])
			}
		}
		for _, x := range []tb.Transfer{t1, t2, t3, t4, t5, t6} {
			f.transferMissing(x.ID)
		}
		hist, err := f.c.GetAccountBalances(tb.AccountFilter{AccountID: lim, Limit: 10, Flags: tb.AccountFilterFlags{Debits: true, Credits: true}.ToUint32()})
		if err != nil || len(hist) != 1 {
			t.Fatalf("GetAccountBalances after the failed chain = %d entries, %v; want 1", len(hist), err)
		}

		// The chain member that failed for a transient reason has used up its
		// ID; the others have not.
		t5.Flags &^= fLinked
		f.expect([]tb.Transfer{t5}, tb.TransferIDAlreadyFailed)
		// A chain with it again: the others validate again and fail again.
		f.expect([]tb.Transfer{t1, t5}, tb.TransferLinkedEventFailed, tb.TransferIDAlreadyFailed)
		t1.Flags &^= fLinked
		t3.Flags &^= fLinked
		f.must(t1, t3) // the pending transfer was still pending
		f.balance(a, bal{dPost: 10 + 3})
		t6.Flags = 0
		f.must(t6)
		// The closing transfer was rolled back: a is open.
		if f.lookupAccount(a).AccountFlags().Closed {
			t.Fatal("account closed by a rolled-back transfer")
		}
	})
}

func TestLinkedChainShapes(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		a, c := acc[0], acc[1]
		missing := tb.ID()
		tr := func() tb.Transfer { return f.transfer(a, c, 1) }
		bad := func() tb.Transfer { return f.transfer(missing, c, 1) }

		// Chains and single events side by side fail independently.
		batch := []tb.Transfer{linked(tr()), bad(), tr(), linked(tr()), linked(tr()), tr(), linked(bad()), tr()}
		res := f.expect(batch,
			tb.TransferLinkedEventFailed, tb.TransferDebitAccountNotFound,
			tb.TransferCreated,
			tb.TransferCreated, tb.TransferCreated, tb.TransferCreated,
			tb.TransferDebitAccountNotFound, tb.TransferLinkedEventFailed)
		for i := 1; i < len(res); i++ {
			if res[i].Timestamp != res[i-1].Timestamp+1 {
				t.Fatalf("result timestamps %d, %d: want consecutive", res[i-1].Timestamp, res[i].Timestamp)
			}
		}
		f.balance(a, bal{dPost: 4})

		// A batch that ends inside a chain.
		f.expect([]tb.Transfer{linked(tr())}, tb.TransferLinkedEventChainOpen)
		f.expect([]tb.Transfer{tr(), linked(tr()), linked(tr())},
			tb.TransferCreated, tb.TransferLinkedEventFailed, tb.TransferLinkedEventChainOpen)
		// linked_event_chain_open wins over the event's own failure.
		f.expect([]tb.Transfer{tr(), linked(bad())}, tb.TransferCreated, tb.TransferLinkedEventChainOpen)
		f.balance(a, bal{dPost: 6})

		// A resubmitted chain: exists fails it.
		t1, t2 := linked(tr()), tr()
		f.must(t1, t2)
		f.expect([]tb.Transfer{t1, t2}, tb.TransferExists, tb.TransferLinkedEventFailed)
		f.expect([]tb.Transfer{t2}, tb.TransferExists)
	})
}

func TestLinkedAccountsRollback(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		a1, a2, a3 := f.account(aLinked), f.account(aLinked), f.account(0)
		a3.Ledger = 0
		res, err := f.c.CreateAccounts([]tb.Account{a1, a2, a3})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := accountStatuses(res), "[AccountLinkedEventFailed AccountLinkedEventFailed AccountLedgerMustNotBeZero]"; got != want {
			t.Fatalf("CreateAccounts = %s, want %s", got, want)
		}
		if got, _ := f.c.LookupAccounts([]tb.Uint128{a1.ID, a2.ID}); len(got) != 0 {
			t.Fatalf("LookupAccounts after a failed chain = %v, want none", got)
		}
		a3.Ledger = f.ledger
		f.createAccounts(a1, a2, a3)
	})
}
