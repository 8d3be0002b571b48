package embedded_test

import (
	"errors"
	"math"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/testenv"
)

// TigerBeetle's largest timestamp is 2^63 - 1: the top bit of its u64
// timestamps is its LSM's tombstone flag.
const timestampMax = math.MaxInt64

// TestImportedTimestampRange checks where imported timestamps stop being in
// range: an imported account or transfer at 2^63 or above is out of range,
// at 2^63 - 1 it is in range but in the future.
func TestImportedTimestampRange(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		tests := []struct {
			ts       uint64
			account  tb.CreateAccountStatus
			transfer tb.CreateTransferStatus
		}{
			{0, tb.AccountImportedEventTimestampOutOfRange, tb.TransferImportedEventTimestampOutOfRange},
			{timestampMax, tb.AccountImportedEventTimestampMustNotAdvance, tb.TransferImportedEventTimestampMustNotAdvance},
			{timestampMax + 1, tb.AccountImportedEventTimestampOutOfRange, tb.TransferImportedEventTimestampOutOfRange},
			{math.MaxUint64 - 1, tb.AccountImportedEventTimestampOutOfRange, tb.TransferImportedEventTimestampOutOfRange},
			{math.MaxUint64, tb.AccountImportedEventTimestampOutOfRange, tb.TransferImportedEventTimestampOutOfRange},
		}
		for _, tt := range tests {
			a := f.account(aImported)
			a.Timestamp = tt.ts
			ares, err := f.c.CreateAccounts([]tb.Account{a})
			if err != nil || len(ares) != 1 {
				t.Fatalf("CreateAccounts(imported at %d) = %v, %v", tt.ts, ares, err)
			}
			if ares[0].Status != tt.account {
				t.Errorf("CreateAccounts(imported at %d) = %v, want %v", tt.ts, ares[0].Status, tt.account)
			}
			x := f.transfer(acc[0], acc[1], 1)
			x.Flags, x.Timestamp = fImported, tt.ts
			if got := f.create(x)[0].Status; got != tt.transfer {
				t.Errorf("CreateTransfers(imported at %d) = %v, want %v", tt.ts, got, tt.transfer)
			}
		}
	})
}

// TestFilterTimestampRange checks that a filter bound past 2^63 - 1 makes a
// query invalid (no results), and that 2^63 - 1 itself is a valid bound.
func TestFilterTimestampRange(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(aHistory, 0)
		f.must(f.transfer(acc[0], acc[1], 1), f.transfer(acc[1], acc[0], 2))
		type bounds struct{ min, max uint64 }
		tests := []struct {
			bounds
			want int
		}{
			{bounds{0, timestampMax}, 2},
			{bounds{1, timestampMax}, 2},
			{bounds{0, timestampMax + 1}, 0},
			{bounds{timestampMax, 0}, 0},
			{bounds{timestampMax, timestampMax}, 0},
			{bounds{timestampMax + 1, 0}, 0},
			{bounds{timestampMax + 1, math.MaxUint64 - 1}, 0},
		}
		for _, tt := range tests {
			af := tb.AccountFilter{AccountID: acc[0], TimestampMin: tt.min, TimestampMax: tt.max, Limit: 10, Flags: both}
			qf := tb.QueryFilter{Ledger: f.ledger, TimestampMin: tt.min, TimestampMax: tt.max, Limit: 10}
			counts := map[string]func() (int, error){
				"GetAccountTransfers": func() (int, error) { r, err := f.c.GetAccountTransfers(af); return len(r), err },
				"GetAccountBalances":  func() (int, error) { r, err := f.c.GetAccountBalances(af); return len(r), err },
				"QueryAccounts":       func() (int, error) { r, err := f.c.QueryAccounts(qf); return len(r), err },
				"QueryTransfers":      func() (int, error) { r, err := f.c.QueryTransfers(qf); return len(r), err },
			}
			for name, count := range counts {
				n, err := count()
				if err != nil || n != tt.want {
					t.Errorf("%s(timestamps %d..%d) = %d results, %v; want %d", name, tt.min, tt.max, n, err, tt.want)
				}
			}
		}
	})
}

// TestClockOutOfRange checks the engine at the end of TigerBeetle's time: a
// request whose timestamps would pass 2^63 - 1 fails with
// ErrClockOutOfRange and changes nothing.
func TestClockOutOfRange(t *testing.T) {
	end := time.Unix(0, timestampMax)
	f, _, clock := engineFixture(t)
	acc := f.accounts(0, 0)
	clock.Set(end.Add(-3))
	// Stamped timestampMax-3: its two events get the last two timestamps.
	res := f.must(f.transfer(acc[0], acc[1], 1), f.transfer(acc[0], acc[1], 1))
	if res[1].Timestamp != timestampMax-1 {
		t.Fatalf("last timestamp %d, want %d", res[1].Timestamp, uint64(timestampMax-1))
	}
	f.balance(acc[0], bal{dPost: 2}) // a read stamped timestampMax
	if _, err := f.c.CreateTransfers([]tb.Transfer{f.transfer(acc[0], acc[1], 1)}); !errors.Is(err, embedded.ErrClockOutOfRange) {
		t.Fatalf("CreateTransfers at the end of time: error %v, want ErrClockOutOfRange", err)
	}
	if _, err := f.c.LookupAccounts(acc); !errors.Is(err, embedded.ErrClockOutOfRange) {
		t.Fatalf("LookupAccounts after the end of time: error %v, want ErrClockOutOfRange", err)
	}

	// A clock far past the year 2262, where time.UnixNano is undefined.
	e := embedded.New(embedded.WithClock(embedded.NewManualClock(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))))
	defer e.Close()
	if _, err := e.CreateAccounts([]tb.Account{{ID: u(1), Ledger: 1, Code: 1}}); !errors.Is(err, embedded.ErrClockOutOfRange) {
		t.Fatalf("CreateAccounts in the year 3000: error %v, want ErrClockOutOfRange", err)
	}
	if now := e.Now(); now.Before(end.Add(-time.Second)) {
		t.Fatalf("Now() in the year 3000 = %v, want the end of time", now)
	}

}
