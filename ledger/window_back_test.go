package ledger_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// Whatever a user's callers do (acquire, reserve, commit some or all,
// cancel, charge past the limit, let reservations expire, authorize and
// capture or release), the whole limit is back one window after the last
// call: nothing a caller does lowers a limit for good.
func TestWholeLimitBackAfterAnySequence(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		if b.Real {
			t.Skip("the sequence needs the manual clock: a window of a minute passes at once")
		}
		w := time.Minute
		c, r := setup(t, b, ledger.Resource{Window: w, DefaultLimit: 100, Lazy: true})
		_, money := setup(t, b, ledger.Resource{Kind: ledger.KindMoney, Window: w, DefaultLimit: 100})
		if err := c.Provision(ctx, money, ledger.UserLimit{Key: "u", Limit: 100}, ledger.UserLimit{Key: "shop"}); err != nil {
			t.Fatal(err)
		}
		if err := c.Fund(ctx, money.Currency, ledger.Request{User: "u", Amount: 1_000_000}); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 11))
		var open []*ledger.Reservation
		var captured uint64
		for range 400 {
			n := 1 + rng.Uint64N(30)
			switch rng.IntN(7) {
			case 0:
				if _, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: n}); err != nil {
					t.Fatal(err)
				}
			case 1:
				rv, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: n})
				if err != nil {
					t.Fatal(err)
				}
				if rv.OK() {
					open = append(open, rv)
				}
			case 2:
				rv, err := c.Authorize(ctx, money, ledger.Payment{From: "u", To: "shop", Amount: n})
				if err != nil {
					t.Fatal(err)
				}
				if rv.OK() {
					open = append(open, rv)
				}
			case 3:
				if _, err := c.Charge(ctx, r, ledger.Request{User: "u", Amount: n}); err != nil {
					t.Fatal(err)
				}
			case 4, 5:
				if len(open) == 0 {
					continue
				}
				i := rng.IntN(len(open))
				rv := open[i]
				open = append(open[:i], open[i+1:]...)
				var err error
				switch k := 1 + rng.Uint64N(rv.Amount()); {
				case rng.IntN(3) == 0:
					err = rv.Cancel(ctx)
				default:
					err = rv.CommitN(ctx, k)
					if err == nil && rv.Resource().Kind == ledger.KindMoney {
						captured += k
					}
				}
				if err != nil && !errorsIsExpired(err) {
					t.Fatal(err)
				}
			case 6:
				b.Advance(t, time.Duration(rng.IntN(20))*time.Second) // some reservations expire unended
			}
		}
		b.Advance(t, w+2*time.Second)
		for _, res := range []ledger.Resource{r, money} {
			if u := inspect(t, c, res, "u"); u.Limit != 100 || u.InFlight != 0 || u.Available != 100 {
				t.Fatalf("%s a window after the last call: %+v; want the whole limit of 100 back", res.Name, u)
			}
		}
		for user, want := range map[string]uint64{"u": 1_000_000 - captured, "shop": captured} {
			if got, err := c.Funds(ctx, money.Currency, user); err != nil || got != want {
				t.Fatalf("%s holds %d, %v; want %d: what was captured moved once, nothing else", user, got, err, want)
			}
		}
	})
}

func errorsIsExpired(err error) bool { return errors.Is(err, ledger.ErrReservationExpired) }
