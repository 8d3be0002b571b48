package embedded_test

import (
	"errors"
	"fmt"
	"testing"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/testenv"
)

var (
	debits   = tb.AccountFilterFlags{Debits: true}.ToUint32()
	credits  = tb.AccountFilterFlags{Credits: true}.ToUint32()
	both     = tb.AccountFilterFlags{Debits: true, Credits: true}.ToUint32()
	reversed = tb.AccountFilterFlags{Reversed: true}.ToUint32()
)

// names maps transfer IDs to short names for readable failures.
type names map[tb.Uint128]string

func (n names) of(transfers []tb.Transfer) string {
	s := make([]string, len(transfers))
	for i, t := range transfers {
		s[i] = n[t.ID]
	}
	return fmt.Sprint(s)
}

func TestGetAccountTransfers(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(aHistory, 0, 0)
		a, c, d := acc[0], acc[1], acc[2]
		t1 := f.transfer(a, c, 1)
		t1.UserData64 = 1
		t2 := f.transfer(c, a, 2)
		t2.Code = 2
		t3 := f.transfer(a, d, 3)
		t3.UserData128 = u(5)
		t4 := f.pending(d, a, 4, 0)
		t4.Code, t4.UserData32 = 3, 7
		t5 := f.resolve(fPost, t4, u(4)) // inherits code 3 and user_data_32 7
		other := f.transfer(c, d, 9)     // not a's
		res := f.must(t1, t2, t3, t4)
		f.must(other, t5)
		n := names{t1.ID: "t1", t2.ID: "t2", t3.ID: "t3", t4.ID: "t4", t5.ID: "t5", other.ID: "other"}

		filter := func(mods ...func(*tb.AccountFilter)) tb.AccountFilter {
			fl := tb.AccountFilter{AccountID: a, Limit: 100, Flags: both}
			for _, m := range mods {
				m(&fl)
			}
			return fl
		}
		flags := func(v uint32) func(*tb.AccountFilter) { return func(fl *tb.AccountFilter) { fl.Flags = v } }
		limit := func(v uint32) func(*tb.AccountFilter) { return func(fl *tb.AccountFilter) { fl.Limit = v } }
		tests := []struct {
			name   string
			filter tb.AccountFilter
			want   string
		}{
			{"debits and credits", filter(), "[t1 t2 t3 t4 t5]"},
			{"debits", filter(flags(debits)), "[t1 t3]"},
			{"credits", filter(flags(credits)), "[t2 t4 t5]"},
			{"reversed", filter(flags(both | reversed)), "[t5 t4 t3 t2 t1]"},
			{"credits reversed", filter(flags(credits | reversed)), "[t5 t4 t2]"},
			{"limit", filter(limit(2)), "[t1 t2]"},
			{"limit reversed", filter(limit(2), flags(both|reversed)), "[t5 t4]"},
			{"timestamp range, inclusive", filter(func(fl *tb.AccountFilter) {
				fl.TimestampMin, fl.TimestampMax = res[1].Timestamp, res[3].Timestamp
			}), "[t2 t3 t4]"},
			{"timestamp_min", filter(func(fl *tb.AccountFilter) { fl.TimestampMin = res[3].Timestamp }), "[t4 t5]"},
			{"timestamp_max", filter(func(fl *tb.AccountFilter) { fl.TimestampMax = res[0].Timestamp }), "[t1]"},
			{"code", filter(func(fl *tb.AccountFilter) { fl.Code = 3 }), "[t4 t5]"},
			{"user_data_128", filter(func(fl *tb.AccountFilter) { fl.UserData128 = u(5) }), "[t3]"},
			{"user_data_64", filter(func(fl *tb.AccountFilter) { fl.UserData64 = 1 }), "[t1]"},
			{"user_data_32", filter(func(fl *tb.AccountFilter) { fl.UserData32 = 7 }), "[t4 t5]"},
			{"code and debits", filter(func(fl *tb.AccountFilter) { fl.Code = 1; fl.Flags = debits }), "[t1 t3]"},
			{"code and credits: none", filter(func(fl *tb.AccountFilter) { fl.Code = 1; fl.Flags = credits }), "[]"},
			{"code and user data", filter(func(fl *tb.AccountFilter) { fl.Code = 3; fl.UserData32 = 8 }), "[]"},
			{"unknown account", filter(func(fl *tb.AccountFilter) { fl.AccountID = tb.ID() }), "[]"},
			{"invalid: account 0", filter(func(fl *tb.AccountFilter) { fl.AccountID = tb.Uint128{} }), "[]"},
			{"invalid: account int max", filter(func(fl *tb.AccountFilter) { fl.AccountID = idMax }), "[]"},
			{"invalid: timestamp_min max", filter(func(fl *tb.AccountFilter) { fl.TimestampMin = ^uint64(0) }), "[]"},
			{"invalid: timestamp_max max", filter(func(fl *tb.AccountFilter) { fl.TimestampMax = ^uint64(0) }), "[]"},
			{"invalid: min after max", filter(func(fl *tb.AccountFilter) {
				fl.TimestampMin, fl.TimestampMax = res[3].Timestamp, res[1].Timestamp
			}), "[]"},
			{"invalid: limit 0", filter(limit(0)), "[]"},
			{"invalid: neither debits nor credits", filter(flags(reversed)), "[]"},
			{"invalid: reserved flag", filter(flags(both | 1<<3)), "[]"},
			{"invalid: reserved", filter(func(fl *tb.AccountFilter) { fl.Reserved[57] = 1 }), "[]"},
		}
		for _, tt := range tests {
			got, err := f.c.GetAccountTransfers(tt.filter)
			if err != nil {
				t.Fatalf("%s: GetAccountTransfers: %v", tt.name, err)
			}
			if got == nil {
				t.Errorf("%s: GetAccountTransfers = nil, want an empty slice", tt.name)
			}
			if s := n.of(got); s != tt.want {
				t.Errorf("%s: GetAccountTransfers = %s, want %s", tt.name, s, tt.want)
			}
		}
		// Transfers come back as stored.
		got, _ := f.c.GetAccountTransfers(filter(limit(1)))
		if want := f.lookupTransfer(t1.ID); len(got) != 1 || got[0] != want {
			t.Errorf("GetAccountTransfers = %+v, want %+v", got, want)
		}
		if _, err := f.c.GetAccountTransfers(filter(limit(10_000))); !errors.Is(err, tb.ErrTooMuchData) {
			t.Errorf("GetAccountTransfers(limit 10000) error = %v, want ErrTooMuchData", err)
		}
	})
}

func TestGetAccountBalances(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(aHistory, 0, aHistory)
		a, c, h2 := acc[0], acc[1], acc[2]
		t1 := f.transfer(c, a, 10)
		t2 := f.pending(a, c, 4, 0)
		t2.Code = 2
		t3 := f.resolve(fPost, t2, u(3))
		t4 := f.transfer(a, h2, 1)
		res := f.must(t1, t2, t3, t4)
		f.expect([]tb.Transfer{f.transfer(a, c, 100)}, tb.TransferCreated)

		get := func(fl tb.AccountFilter) []tb.AccountBalance {
			t.Helper()
			got, err := f.c.GetAccountBalances(fl)
			if err != nil {
				t.Fatalf("GetAccountBalances: %v", err)
			}
			if got == nil {
				t.Fatal("GetAccountBalances = nil, want an empty slice")
			}
			return got
		}
		check := func(name string, got []tb.AccountBalance, want []bal, stamps []uint64) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%s: GetAccountBalances = %d entries, want %d", name, len(got), len(want))
			}
			for i := range want {
				if g := balOfBalance(got[i]); g != want[i] || got[i].Timestamp != stamps[i] {
					t.Errorf("%s: entry %d = %v at %d, want %v at %d", name, i, g, got[i].Timestamp, want[i], stamps[i])
				}
			}
		}
		all := []bal{{cPost: 10}, {dPend: 4, cPost: 10}, {dPost: 3, cPost: 10}, {dPost: 4, cPost: 10}, {dPost: 104, cPost: 10}}
		last := f.lookupTransfer(f.mustLast(a)).Timestamp
		stamps := []uint64{res[0].Timestamp, res[1].Timestamp, res[2].Timestamp, res[3].Timestamp, last}
		check("all", get(tb.AccountFilter{AccountID: a, Limit: 100, Flags: both}), all, stamps)
		check("reversed, limit 2", get(tb.AccountFilter{AccountID: a, Limit: 2, Flags: both | reversed}),
			[]bal{all[4], all[3]}, []uint64{stamps[4], stamps[3]})
		check("credits", get(tb.AccountFilter{AccountID: a, Limit: 100, Flags: credits}), all[:1], stamps[:1])
		check("code 2", get(tb.AccountFilter{AccountID: a, Limit: 100, Flags: both, Code: 2}), all[1:3], stamps[1:3])
		check("timestamp range", get(tb.AccountFilter{AccountID: a, Limit: 100, Flags: both, TimestampMin: stamps[1], TimestampMax: stamps[2]}), all[1:3], stamps[1:3])
		check("the credit side", get(tb.AccountFilter{AccountID: h2, Limit: 100, Flags: both}), []bal{{cPost: 1}}, stamps[3:4])
		check("no history flag", get(tb.AccountFilter{AccountID: c, Limit: 100, Flags: both}), nil, nil)
		check("unknown account", get(tb.AccountFilter{AccountID: tb.ID(), Limit: 100, Flags: both}), nil, nil)
		check("invalid filter", get(tb.AccountFilter{AccountID: a, Limit: 100}), nil, nil)
		if _, err := f.c.GetAccountBalances(tb.AccountFilter{AccountID: a, Limit: 10_000, Flags: both}); !errors.Is(err, tb.ErrTooMuchData) {
			t.Errorf("GetAccountBalances(limit 10000) error = %v, want ErrTooMuchData", err)
		}
	})
}

// mustLast returns the ID of the account's latest transfer.
func (f *fixture) mustLast(account tb.Uint128) tb.Uint128 {
	f.t.Helper()
	got, err := f.c.GetAccountTransfers(tb.AccountFilter{AccountID: account, Limit: 1, Flags: both | reversed})
	if err != nil || len(got) != 1 {
		f.t.Fatalf("GetAccountTransfers(latest) = %d, %v", len(got), err)
	}
	return got[0].ID
}

func TestQueryAccounts(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		var batch []tb.Account
		n := map[tb.Uint128]string{}
		for i := range 6 {
			a := f.account(0)
			a.UserData128 = u(uint64(100 + i%2))
			a.UserData64 = uint64(200 + i%3)
			a.UserData32 = uint32(300 + i/3)
			a.Code = uint16(1 + i%2)
			batch = append(batch, a)
			n[a.ID] = fmt.Sprintf("a%d", i)
		}
		res := f.createAccounts(batch...)
		of := func(accounts []tb.Account) string {
			s := make([]string, len(accounts))
			for i, a := range accounts {
				s[i] = n[a.ID]
			}
			return fmt.Sprint(s)
		}
		q := func(mods ...func(*tb.QueryFilter)) tb.QueryFilter {
			fl := tb.QueryFilter{Ledger: f.ledger, Limit: 100}
			for _, m := range mods {
				m(&fl)
			}
			return fl
		}
		tests := []struct {
			name   string
			filter tb.QueryFilter
			want   string
		}{
			{"ledger", q(), "[a0 a1 a2 a3 a4 a5]"},
			{"reversed", q(func(fl *tb.QueryFilter) { fl.Flags = tb.QueryFilterFlags{Reversed: true}.ToUint32() }), "[a5 a4 a3 a2 a1 a0]"},
			{"limit", q(func(fl *tb.QueryFilter) { fl.Limit = 2 }), "[a0 a1]"},
			{"code", q(func(fl *tb.QueryFilter) { fl.Code = 2 }), "[a1 a3 a5]"},
			{"user_data_128", q(func(fl *tb.QueryFilter) { fl.UserData128 = u(100) }), "[a0 a2 a4]"},
			{"user_data_64", q(func(fl *tb.QueryFilter) { fl.UserData64 = 201 }), "[a1 a4]"},
			{"user_data_32", q(func(fl *tb.QueryFilter) { fl.UserData32 = 301 }), "[a3 a4 a5]"},
			{"all fields", q(func(fl *tb.QueryFilter) { fl.UserData128, fl.UserData64, fl.UserData32, fl.Code = u(101), 200, 301, 2 }), "[a3]"},
			{"timestamp range", q(func(fl *tb.QueryFilter) { fl.TimestampMin, fl.TimestampMax = res[1].Timestamp, res[2].Timestamp }), "[a1 a2]"},
			{"no match", q(func(fl *tb.QueryFilter) { fl.Code = 9 }), "[]"},
			{"invalid: limit 0", q(func(fl *tb.QueryFilter) { fl.Limit = 0 }), "[]"},
			{"invalid: reserved flag", q(func(fl *tb.QueryFilter) { fl.Flags = 2 }), "[]"},
			{"invalid: reserved", q(func(fl *tb.QueryFilter) { fl.Reserved[0] = 1 }), "[]"},
			{"invalid: timestamp_max max", q(func(fl *tb.QueryFilter) { fl.TimestampMax = ^uint64(0) }), "[]"},
			{"invalid: min after max", q(func(fl *tb.QueryFilter) { fl.TimestampMin, fl.TimestampMax = res[2].Timestamp, res[1].Timestamp }), "[]"},
		}
		for _, tt := range tests {
			got, err := f.c.QueryAccounts(tt.filter)
			if err != nil {
				t.Fatalf("%s: QueryAccounts: %v", tt.name, err)
			}
			if s := of(got); s != tt.want {
				t.Errorf("%s: QueryAccounts = %s, want %s", tt.name, s, tt.want)
			}
		}
		if _, err := f.c.QueryAccounts(q(func(fl *tb.QueryFilter) { fl.Limit = 10_000 })); !errors.Is(err, tb.ErrTooMuchData) {
			t.Errorf("QueryAccounts(limit 10000) error = %v, want ErrTooMuchData", err)
		}
	})
}

func TestQueryTransfers(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		a, c := acc[0], acc[1]
		var batch []tb.Transfer
		n := names{}
		for i := range 6 {
			x := f.transfer(a, c, uint64(i))
			if i%2 == 1 {
				x = f.transfer(c, a, uint64(i))
			}
			x.UserData128 = u(uint64(100 + i%2))
			x.UserData64 = uint64(200 + i%3)
			x.UserData32 = uint32(300 + i/3)
			x.Code = uint16(1 + i%2)
			batch = append(batch, x)
			n[x.ID] = fmt.Sprintf("t%d", i)
		}
		res := f.must(batch...)
		q := func(mods ...func(*tb.QueryFilter)) tb.QueryFilter {
			fl := tb.QueryFilter{Ledger: f.ledger, Limit: 100}
			for _, m := range mods {
				m(&fl)
			}
			return fl
		}
		tests := []struct {
			name   string
			filter tb.QueryFilter
			want   string
		}{
			{"ledger", q(), "[t0 t1 t2 t3 t4 t5]"},
			{"reversed, limit", q(func(fl *tb.QueryFilter) { fl.Flags, fl.Limit = tb.QueryFilterFlags{Reversed: true}.ToUint32(), 3 }), "[t5 t4 t3]"},
			{"code", q(func(fl *tb.QueryFilter) { fl.Code = 2 }), "[t1 t3 t5]"},
			{"user_data_128", q(func(fl *tb.QueryFilter) { fl.UserData128 = u(100) }), "[t0 t2 t4]"},
			{"user_data_64", q(func(fl *tb.QueryFilter) { fl.UserData64 = 202 }), "[t2 t5]"},
			{"user_data_32", q(func(fl *tb.QueryFilter) { fl.UserData32 = 300 }), "[t0 t1 t2]"},
			{"timestamp range", q(func(fl *tb.QueryFilter) { fl.TimestampMin, fl.TimestampMax = res[4].Timestamp, res[5].Timestamp }), "[t4 t5]"},
			{"invalid: limit 0", q(func(fl *tb.QueryFilter) { fl.Limit = 0 }), "[]"},
			{"invalid: timestamp_min max", q(func(fl *tb.QueryFilter) { fl.TimestampMin = ^uint64(0) }), "[]"},
		}
		for _, tt := range tests {
			got, err := f.c.QueryTransfers(tt.filter)
			if err != nil {
				t.Fatalf("%s: QueryTransfers: %v", tt.name, err)
			}
			if s := n.of(got); s != tt.want {
				t.Errorf("%s: QueryTransfers = %s, want %s", tt.name, s, tt.want)
			}
		}
		if _, err := f.c.QueryTransfers(q(func(fl *tb.QueryFilter) { fl.Limit = 10_000 })); !errors.Is(err, tb.ErrTooMuchData) {
			t.Errorf("QueryTransfers(limit 10000) error = %v, want ErrTooMuchData", err)
		}
	})
}

func TestLookups(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		f := newFixture(t, b)
		acc := f.accounts(0, 0)
		a, c := acc[0], acc[1]
		t1, t2 := f.transfer(a, c, 1), f.transfer(c, a, 2)
		f.must(t1, t2)
		missing := tb.ID()

		accounts, err := f.c.LookupAccounts([]tb.Uint128{c, missing, a, c})
		if err != nil {
			t.Fatal(err)
		}
		if len(accounts) != 3 || accounts[0].ID != c || accounts[1].ID != a || accounts[2].ID != c {
			t.Errorf("LookupAccounts(c, missing, a, c) = %v, want c, a, c", accounts)
		}
		transfers, err := f.c.LookupTransfers([]tb.Uint128{missing, t2.ID, t1.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(transfers) != 2 || transfers[0].ID != t2.ID || transfers[1].ID != t1.ID {
			t.Errorf("LookupTransfers(missing, t2, t1) = %v, want t2, t1", transfers)
		}
		for _, got := range [][]tb.Account{mustAccounts(f.c.LookupAccounts(nil)), mustAccounts(f.c.LookupAccounts([]tb.Uint128{missing}))} {
			if got == nil || len(got) != 0 {
				t.Errorf("LookupAccounts of nothing = %#v, want an empty slice", got)
			}
		}
	})
}

func mustAccounts(a []tb.Account, err error) []tb.Account {
	if err != nil {
		panic(err)
	}
	return a
}
