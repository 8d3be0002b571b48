package embedded_test

import (
	"sync/atomic"
	"testing"

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
