package embedded_test

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
)

// BenchmarkCreateTransfersPending measures one pending transfer per
// CreateTransfers call, the shape of one rate-limit decision.
func BenchmarkCreateTransfersPending(b *testing.B) {
	setup := func(b *testing.B) *embedded.Engine {
		e := embedded.New()
		b.Cleanup(e.Close)
		res, err := e.CreateAccounts([]tb.Account{
			{ID: u(1), Ledger: 1, Code: 1},
			{ID: u(2), Ledger: 1, Code: 1, Flags: aDebitsLimited},
		})
		if err != nil || res[1].Status != tb.AccountCreated {
			b.Fatal(res, err)
		}
		if _, err := e.CreateTransfers([]tb.Transfer{{ID: u(1), DebitAccountID: u(1), CreditAccountID: u(2), Amount: amountMax, Ledger: 1, Code: 1}}); err != nil {
			b.Fatal(err)
		}
		return e
	}
	var next atomic.Uint64
	next.Store(1 << 32)
	decide := func(b *testing.B, e *embedded.Engine, id uint64) {
		res, err := e.CreateTransfers([]tb.Transfer{{
			ID: u(id), DebitAccountID: u(2), CreditAccountID: u(1), Amount: u(1),
			Ledger: 1, Code: 1, Flags: fPending, Timeout: 3600,
		}})
		if err != nil || res[0].Status != tb.TransferCreated {
			b.Fatal(res, err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		e := setup(b)
		b.ReportAllocs()
		for b.Loop() {
			decide(b, e, next.Add(1))
		}
	})
	b.Run("parallel", func(b *testing.B) {
		e := setup(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				decide(b, e, next.Add(1))
			}
		})
	})
}

// benchUsers returns an engine with an operator account (ID 1) and users
// debit-limited user accounts, each credited far more than a benchmark takes,
// and the users' IDs (random, like ledger's hashed user IDs).
func benchUsers(b *testing.B, users int, opts ...embedded.Option) (*embedded.Engine, []tb.Uint128) {
	b.Helper()
	e := embedded.New(opts...)
	b.Cleanup(e.Close)
	ids := make([]tb.Uint128, users)
	accounts := []tb.Account{{ID: u(1), Ledger: 1, Code: 1}}
	credits := make([]tb.Transfer, users)
	for i := range ids {
		ids[i] = tb.ID()
		accounts = append(accounts, tb.Account{ID: ids[i], Ledger: 1, Code: 1, Flags: aDebitsLimited})
		credits[i] = tb.Transfer{ID: tb.ID(), DebitAccountID: u(1), CreditAccountID: ids[i], Amount: u(1 << 62), Ledger: 1, Code: 1}
	}
	if res, err := e.CreateAccounts(accounts); err != nil || res[len(res)-1].Status != tb.AccountCreated {
		b.Fatal(res, err)
	}
	if res, err := e.CreateTransfers(credits); err != nil || res[len(res)-1].Status != tb.TransferCreated {
		b.Fatal(res, err)
	}
	return e, ids
}

// BenchmarkLookupAccounts measures LookupAccounts of one ID, of 64 copies of
// one hot ID, and of 64 distinct IDs out of 1024 accounts.
func BenchmarkLookupAccounts(b *testing.B) {
	e, users := benchUsers(b, 1024)
	hot := make([]tb.Uint128, 64)
	for i := range hot {
		hot[i] = users[0]
	}
	for _, c := range []struct {
		name string
		ids  []tb.Uint128
	}{{"ids=1", users[:1]}, {"ids=64/hot", hot}, {"ids=64/distinct", users[:64]}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				found, err := e.LookupAccounts(c.ids)
				if err != nil || len(found) != len(c.ids) {
					b.Fatal(len(found), err)
				}
			}
		})
	}
}

// BenchmarkBatch64 measures the batches package ledger sends the engine
// under concurrent decisions: 64 pending transfers user -> operator (one
// user, or 1024 round robin) then a lookup of the 64 debit accounts, with
// about a million pending transfers stored and as many expiring as are
// created (a steady state with a 1 s window, on a manual clock). ns/decision
// is ns/op / 64.
func BenchmarkBatch64(b *testing.B) {
	const (
		batch  = 64
		stored = 1 << 20
		step   = time.Second / stored // clock advance per transfer: stored pending at any time
	)
	for _, users := range []int{1, 1024} {
		b.Run(fmt.Sprintf("users=%d", users), func(b *testing.B) {
			clock := embedded.NewManualClock(time.Unix(1_700_000_000, 0))
			e, ids := benchUsers(b, users, embedded.WithClock(clock))
			seq := uint64(1) << 40
			xfers := make([]tb.Transfer, 8189)
			lookup := make([]tb.Uint128, batch)
			user := 0
			fill := func(xs []tb.Transfer, look []tb.Uint128) {
				for i := range xs {
					seq++
					xs[i] = tb.Transfer{
						ID:             toU128(seq, 0x0190_0000_0000_1234),
						DebitAccountID: ids[user], CreditAccountID: u(1), Amount: u(1),
						Ledger: 1, Code: 1, Flags: fPending, Timeout: 1,
					}
					if look != nil {
						look[i] = ids[user]
					}
					user = (user + 1) % users
				}
			}
			create := func(xs []tb.Transfer) {
				clock.Advance(time.Duration(len(xs)) * step)
				res, err := e.CreateTransfers(xs)
				if err != nil || res[len(res)-1].Status != tb.TransferCreated {
					b.Fatal(res[len(res)-1], err)
				}
			}
			for range stored / len(xfers) {
				fill(xfers, nil)
				create(xfers)
			}
			b.ReportAllocs()
			for b.Loop() {
				fill(xfers[:batch], lookup)
				create(xfers[:batch])
				found, err := e.LookupAccounts(lookup)
				if err != nil || len(found) != batch {
					b.Fatal(len(found), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/decision")
		})
	}
}

func toU128(lo, hi uint64) tb.Uint128 {
	var v [16]byte
	binary.LittleEndian.PutUint64(v[:8], lo)
	binary.LittleEndian.PutUint64(v[8:], hi)
	return tb.Uint128(v)
}
