package ledger_test

import (
	"errors"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

func TestAudit(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Minute, DefaultLimit: 3})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "good", Limit: 3}, ledger.UserLimit{Key: "bad", Limit: 2}); err != nil {
			t.Fatal(err)
		}
		from := b.Now().Add(-time.Second)
		acquire(t, c, r, "good", 2)
		rv, err := c.Reserve(ctx, r, ledger.Request{User: "good", Amount: 1})
		if err != nil || !rv.OK() {
			t.Fatalf("Reserve = %+v, %v", rv, err)
		}
		if err := rv.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		acquire(t, c, r, "good", 1)
		a, err := c.Audit(ctx, r, "good", from, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if !a.OK() || a.Limit != 3 || a.Holds != 3 || a.Units != 4 || a.Ended != 1 || a.MostInWindow != 3 || a.MostInFlight != 3 || len(a.Over) != 0 {
			t.Fatalf("Audit(good) = %+v, want 3 holds of 4 units, one ended, 3 in the window, nothing over", a)
		}
		// Another program holds bad's units for a second instead of a
		// window: they come back early, and the window holds more than
		// the limit. The audit must say so.
		res, err := b.Client.CreateTransfers([]tb.Transfer{{
			ID:              tb.ID(),
			DebitAccountID:  tb.BytesToUint128(ledger.UserID(r.Ledger, "bad")),
			CreditAccountID: tb.BytesToUint128(ledger.OperatorID(r.Ledger)),
			Amount:          tb.ToUint128(2),
			Timeout:         1,
			Ledger:          r.Ledger,
			Code:            10,
			Flags:           tb.TransferFlags{Pending: true}.ToUint16(),
		}})
		if err != nil || res[0].Status != tb.TransferCreated {
			t.Fatalf("a short hold = %v, %v", res, err)
		}
		b.Advance(t, 1100*time.Millisecond)
		if b.Real {
			time.Sleep(500 * time.Millisecond)
		}
		if d := acquire(t, ledger.New(b.Client), r, "bad", 2); !d.Allowed {
			t.Fatalf("Acquire(bad, 2) after the short hold returned = %+v", d)
		}
		a, err = c.Audit(ctx, r, "bad", from, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if a.OK() || a.MostInWindow != 4 || a.MostInFlight != 2 || len(a.Over) == 0 {
			t.Fatalf("Audit(bad) = %+v, want a window of 4 units over the limit of 2", a)
		}
	})
}

// The audit checks each interval against the limit of its time: a
// committed reservation and a lowered limit are not violations.
func TestAuditFollowsTheLimitOverTime(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 3})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 3}); err != nil {
			t.Fatal(err)
		}
		from := b.Now().Add(-time.Second)
		rv, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 2})
		if err != nil || !rv.OK() {
			t.Fatalf("Reserve = %+v, %v", rv, err)
		}
		acquire(t, c, r, "u", 1) // 3 of 3 in flight
		if err := rv.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.SetLimit(ctx, r, "u", 4); err != nil { // raised while the commit keeps 2, then lowered
			t.Fatal(err)
		}
		acquire(t, c, r, "u", 1)
		if err := c.SetLimit(ctx, r, "u", 1); err != nil {
			t.Fatal(err)
		}
		a, err := c.Audit(ctx, r, "u", from, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if !a.OK() || a.Limit != 1 || a.LimitMax != 4 || a.MostInFlight != 4 {
			t.Fatalf("Audit = %+v, want OK: 4 in flight under a limit of 4, limits from 1 to 4", a)
		}
		// Under the limit of now (1), the same record would look 4 times over.
		id, err := c.Users(ctx, r)
		if err != nil || len(id) != 1 {
			t.Fatal(id, err)
		}
		byID, err := c.AuditAccount(ctx, r, id[0].ID, from, time.Time{})
		if err != nil || byID.MostInFlight != a.MostInFlight || byID.OK() != a.OK() {
			t.Fatalf("AuditAccount = %+v, %v; want the same as Audit", byID, err)
		}
	})
}

// A user's limit that changes while the audit reads (a lazy user's credit
// landing, a SetLimit) is read as of one moment with the transfers: the
// holds taken under the old limit are not checked against a limit worked
// back from a newer one.
func TestAuditReadsTheLimitWithItsTransfers(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 3})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 3}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			acquire(t, c, r, "u", 1) // 3 of 3 in flight
		}
		limit := uint64(3)
		raise := &raiser{Client: b.Client, raise: func() {
			limit++
			if err := c.SetLimit(ctx, r, "u", limit); err != nil {
				t.Error(err)
			}
		}}
		raise.left = 1 // raised just after the audit reads the account
		a, err := ledger.New(raise).Audit(ctx, r, "u", time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if !a.OK() || a.Limit != 4 || a.LimitMin != 3 || a.LimitMax != 4 || a.MostInFlight != 3 {
			t.Fatalf("Audit = %+v, want OK: 3 in flight under a limit of 3, then 4", a)
		}
		raise.left = 1000 // raised after every read
		if _, err := ledger.New(raise).Audit(ctx, r, "u", time.Time{}, time.Time{}); !errors.Is(err, ledger.ErrLimitChanging) {
			t.Fatalf("Audit of a limit raised after every read = %v, want ErrLimitChanging", err)
		}
		// Holds taken as it reads change no limit: read once, and they are
		// not over it.
		auditor := ledger.New(&raiser{Client: b.Client, left: 1000, raise: func() { acquire(t, c, r, "u", 1) }})
		a, err = auditor.Audit(ctx, r, "u", time.Time{}, time.Time{})
		if err != nil || !a.OK() || a.Holds < 3 {
			t.Fatalf("Audit with holds taken as it reads = %+v, %v; want OK", a, err)
		}
		if n := auditor.Stats().GetAccountTransfers.Requests; n != 2 {
			t.Fatalf("Audit with holds taken as it reads read transfers %d times, want 2 (the transfers, then those after the limit)", n)
		}
	})
}

// raiser runs raise after each of the next left account lookups.
type raiser struct {
	tb.Client
	raise func()
	left  int
}

func (r *raiser) LookupAccounts(ids []tb.Uint128) ([]tb.Account, error) {
	as, err := r.Client.LookupAccounts(ids)
	if r.left > 0 {
		r.left--
		r.raise()
	}
	return as, err
}
