package embedded_test

import (
	"errors"
	"sync"
	"testing"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/testenv"
)

func TestBatchLimits(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		const over = 8190
		accounts := make([]tb.Account, over)
		transfers := make([]tb.Transfer, over)
		ids := make([]tb.Uint128, over)
		for i := range over {
			accounts[i] = f.account(0)
			transfers[i] = f.transfer(acc[0], acc[1], 1)
			ids[i] = transfers[i].ID
		}
		if _, err := f.c.CreateAccounts(accounts); !errors.Is(err, tb.ErrTooMuchData) {
			t.Errorf("CreateAccounts(8190 accounts) error = %v, want ErrTooMuchData", err)
		}
		if _, err := f.c.CreateTransfers(transfers); !errors.Is(err, tb.ErrTooMuchData) {
			t.Errorf("CreateTransfers(8190 transfers) error = %v, want ErrTooMuchData", err)
		}
		if _, err := f.c.LookupAccounts(ids); !errors.Is(err, tb.ErrTooMuchData) {
			t.Errorf("LookupAccounts(8190 IDs) error = %v, want ErrTooMuchData", err)
		}
		if _, err := f.c.LookupTransfers(ids); !errors.Is(err, tb.ErrTooMuchData) {
			t.Errorf("LookupTransfers(8190 IDs) error = %v, want ErrTooMuchData", err)
		}
		f.balance(acc[0], bal{})
		if b.Real {
			return // a --development server caps requests at 32 KiB
		}
		f.must(transfers[:8189]...)
		f.balance(acc[0], bal{dPost: 8189})
		if got, err := f.c.LookupTransfers(ids[:8189]); err != nil || len(got) != 8189 {
			t.Errorf("LookupTransfers(8189 IDs) = %d transfers, %v; want 8189", len(got), err)
		}
		got, err := f.c.GetAccountTransfers(tb.AccountFilter{AccountID: acc[0], Limit: 8189, Flags: both})
		if err != nil || len(got) != 8189 {
			t.Errorf("GetAccountTransfers(limit 8189) = %d transfers, %v; want 8189", len(got), err)
		}
		for _, limit := range []uint32{8190, ^uint32(0)} {
			if _, err := f.c.QueryTransfers(tb.QueryFilter{Limit: limit}); !errors.Is(err, tb.ErrTooMuchData) {
				t.Errorf("QueryTransfers(limit %d) error = %v, want ErrTooMuchData", limit, err)
			}
		}
	})
}

func TestEmptyRequests(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ar, err := b.Client.CreateAccounts(nil)
		if err != nil || ar == nil || len(ar) != 0 {
			t.Errorf("CreateAccounts(nil) = %#v, %v; want an empty slice", ar, err)
		}
		tr, err := b.Client.CreateTransfers([]tb.Transfer{})
		if err != nil || tr == nil || len(tr) != 0 {
			t.Errorf("CreateTransfers(empty) = %#v, %v; want an empty slice", tr, err)
		}
		if err := b.Client.Nop(); err != nil {
			t.Errorf("Nop() = %v", err)
		}
	})
}

func TestTimestamps(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		a, c := acc[0], acc[1]
		bad := f.transfer(a, c, 1)
		bad.Ledger = 0
		t1, t3 := f.transfer(a, c, 1), f.transfer(a, c, 1)
		r1 := f.expect([]tb.Transfer{t1, bad, t3}, tb.TransferCreated, tb.TransferLedgerMustNotBeZero, tb.TransferCreated)
		if r1[1].Timestamp != r1[0].Timestamp+1 || r1[2].Timestamp != r1[1].Timestamp+1 {
			t.Fatalf("timestamps of one batch = %d %d %d, want consecutive", r1[0].Timestamp, r1[1].Timestamp, r1[2].Timestamp)
		}
		if got := f.lookupTransfer(t3.ID).Timestamp; got != r1[2].Timestamp {
			t.Fatalf("stored timestamp %d, result said %d", got, r1[2].Timestamp)
		}
		r2 := f.expect([]tb.Transfer{t1, f.transfer(a, c, 1)}, tb.TransferExists, tb.TransferCreated)
		if r2[0].Timestamp != r1[0].Timestamp {
			t.Fatalf("exists timestamp %d, want the original %d", r2[0].Timestamp, r1[0].Timestamp)
		}
		if r2[1].Timestamp <= r1[2].Timestamp {
			t.Fatalf("a later request's timestamp %d is not after %d", r2[1].Timestamp, r1[2].Timestamp)
		}
		if got := f.lookupAccount(a).Timestamp; got >= r1[0].Timestamp {
			t.Fatalf("account timestamp %d not before its transfers' %d", got, r1[0].Timestamp)
		}
	})
}

func TestConcurrentCreates(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(aDebitsLimited, 0)
		user, op := acc[0], acc[1]
		f.fund(user, 100)
		const workers, perWorker = 8, 25
		var wg sync.WaitGroup
		var mu sync.Mutex
		created := 0
		for range workers {
			wg.Go(func() {
				for range perWorker {
					res, err := f.c.CreateTransfers([]tb.Transfer{f.pending(user, op, 1, 0)})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					switch res[0].Status {
					case tb.TransferCreated:
						created++
					case tb.TransferExceedsCredits:
					default:
						t.Errorf("CreateTransfers = %v", res[0].Status)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if created != 100 {
			t.Fatalf("%d of %d pending transfers created, want exactly the limit 100", created, workers*perWorker)
		}
		f.balance(user, bal{dPend: 100, cPost: 100})
	})
}

func TestClose(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c := b.Client
		if err := c.Nop(); err != nil {
			t.Fatalf("Nop() = %v", err)
		}
		c.Close()
		c.Close()
		calls := map[string]func() error{
			"Nop":             c.Nop,
			"CreateAccounts":  func() error { _, err := c.CreateAccounts([]tb.Account{{ID: tb.ID(), Ledger: 1, Code: 1}}); return err },
			"CreateTransfers": func() error { _, err := c.CreateTransfers([]tb.Transfer{{ID: tb.ID()}}); return err },
			"LookupAccounts":  func() error { _, err := c.LookupAccounts([]tb.Uint128{tb.ID()}); return err },
			"LookupTransfers": func() error { _, err := c.LookupTransfers([]tb.Uint128{tb.ID()}); return err },
			"GetAccountTransfers": func() error {
				_, err := c.GetAccountTransfers(tb.AccountFilter{AccountID: tb.ID(), Limit: 1, Flags: both})
				return err
			},
			"GetAccountBalances": func() error {
				_, err := c.GetAccountBalances(tb.AccountFilter{AccountID: tb.ID(), Limit: 1, Flags: both})
				return err
			},
			"QueryAccounts":   func() error { _, err := c.QueryAccounts(tb.QueryFilter{Limit: 1}); return err },
			"QueryTransfers":  func() error { _, err := c.QueryTransfers(tb.QueryFilter{Limit: 1}); return err },
			"GetChangeEvents": func() error { _, err := c.GetChangeEvents(tb.ChangeEventsFilter{Limit: 1}); return err },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, tb.ErrClientClosed) {
				t.Errorf("%s after Close: error %v, want ErrClientClosed", name, err)
			}
		}
	})
}
