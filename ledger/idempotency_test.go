package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/testenv"
)

// The first decision of a lazy user made under a caller's ID is admitted
// under that ID, and the same call again answers the same admission.
func TestCallerIDForANewLazyUser(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 100, Lazy: true})
		id := ledger.KeyID(b.Key("request-1"))
		for i := 0; i < 3; i++ {
			d, err := c.Acquire(ctx, r, ledger.Request{User: "newcomer", Amount: 1, ID: id})
			if err != nil || !d.Allowed || d.ID != id {
				t.Fatalf("Acquire #%d under %s = %+v, %v; want admitted under it", i+1, id, d, err)
			}
		}
		if u := inspect(t, c, r, "newcomer"); u.InFlight != 1 {
			t.Fatalf("in flight %d after three calls of one request, want 1", u.InFlight)
		}
	})
}

// An admission under an ID is final; a denial is not: the request can be
// made again under the same ID once units returned, and then counts once.
func TestRequestIDs(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		w := 2 * time.Second
		c, r := setup(t, b, ledger.Resource{Window: w, DefaultLimit: 1})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 1}); err != nil {
			t.Fatal(err)
		}
		other := ledger.New(b.Client) // another process, retrying too
		first := acquire(t, c, r, "u", 1)
		id := ledger.KeyID(b.Key("order-42"))
		for _, cl := range []*ledger.Client{c, other, c} {
			d, err := cl.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1, ID: id})
			if err != nil || d.Allowed || d.Reason != ledger.LimitExceeded || d.ID != id {
				t.Fatalf("Acquire under %s with nothing left = %+v, %v; want denied", id, d, err)
			}
		}
		b.Advance(t, time.Duration(first.Timestamp+uint64(w)-uint64(b.Now().UnixNano()))+time.Millisecond)
		if b.Real {
			time.Sleep(300 * time.Millisecond)
		}
		admitted := 0
		for _, cl := range []*ledger.Client{c, other, c, other} {
			d, err := cl.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1, ID: id})
			if err != nil || !d.Allowed || d.ID != id {
				t.Fatalf("Acquire under %s after the unit returned = %+v, %v; want admitted", id, d, err)
			}
			admitted++
		}
		if u := inspect(t, c, r, "u"); u.InFlight != 1 {
			t.Fatalf("%d admissions of one request: %d in flight, want 1", admitted, u.InFlight)
		}
		// An ID names one request.
		for _, amount := range []uint64{2} {
			if _, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: amount, ID: id}); !errors.Is(err, ledger.ErrIDReused) {
				t.Fatalf("the ID again for %d units = %v, want ErrIDReused", amount, err)
			}
		}
		if _, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1, ID: first.ID}); err != nil {
			t.Fatalf("the first request again = %v", err)
		}
	})
}

// A payment is made at most once under its ID: a lost answer is retried
// safely, and one refused for want of funds is made once funds arrive.
func TestPaymentIDs(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 1000})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "alice", Limit: 1000}, ledger.UserLimit{Key: "shop", Limit: 0}); err != nil {
			t.Fatal(err)
		}
		if err := c.Fund(ctx, r.Currency, ledger.Request{User: "alice", Amount: 100}); err != nil {
			t.Fatal(err)
		}
		pay := func(id ledger.ID, amount uint64) ledger.Decision {
			t.Helper()
			d, err := c.Pay(ctx, r, ledger.Payment{From: "alice", To: "shop", Amount: amount, ID: id})
			if err != nil {
				t.Fatalf("Pay(%s, %d) = %v", id, amount, err)
			}
			return d
		}
		paid := ledger.KeyID(b.Key("invoice-1"))
		for i := 0; i < 3; i++ {
			if d := pay(paid, 60); !d.Allowed || d.ID != paid {
				t.Fatalf("Pay #%d of invoice-1 = %+v, want paid", i+1, d)
			}
		}
		short := ledger.KeyID(b.Key("invoice-2"))
		for i := 0; i < 2; i++ {
			if d := pay(short, 60); d.Allowed || d.Reason != ledger.InsufficientFunds {
				t.Fatalf("Pay #%d of invoice-2 with 40 held = %+v, want insufficient funds", i+1, d)
			}
		}
		if err := c.Fund(ctx, r.Currency, ledger.Request{User: "alice", Amount: 100}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if d := pay(short, 60); !d.Allowed || d.ID != short {
				t.Fatalf("Pay #%d of invoice-2 once funded = %+v, want paid", i+1, d)
			}
		}
		if f, err := c.Funds(ctx, r.Currency, "alice"); err != nil || f != 200-120 {
			t.Fatalf("alice holds %d, %v; want 80: two payments of 60, each made once", f, err)
		}
		if f, err := c.Funds(ctx, r.Currency, "shop"); err != nil || f != 120 {
			t.Fatalf("shop holds %d, %v; want 120", f, err)
		}
	})
}

// An ID names one payment, payee included: used again for the same user
// and amount to another payee it is ErrIDReused, and nothing moves,
// whether the ID was admitted at its first attempt or after a denial.
func TestPaymentIDNamesThePayee(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 1000})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "cust", Limit: 1000}, ledger.UserLimit{Key: "shopA"}, ledger.UserLimit{Key: "shopB"}); err != nil {
			t.Fatal(err)
		}
		fund := func(n uint64) {
			t.Helper()
			if err := c.Fund(ctx, r.Currency, ledger.Request{User: "cust", Amount: n}); err != nil {
				t.Fatal(err)
			}
		}
		holds := func(user string, want uint64) {
			t.Helper()
			if f, err := c.Funds(ctx, r.Currency, user); err != nil || f != want {
				t.Errorf("%s holds %d, %v; want %d", user, f, err, want)
			}
		}
		fund(500)
		// The IDs are the test's own: a real server outlives one test.
		first := ledger.KeyID(b.Key("order-1"))
		if d, err := c.Pay(ctx, r, ledger.Payment{From: "cust", To: "shopA", Amount: 500, ID: first}); err != nil || !d.Allowed {
			t.Fatalf("PayID(order-1, shopA) = %+v, %v; want paid", d, err)
		}
		fund(500)
		if d, err := c.Pay(ctx, r, ledger.Payment{From: "cust", To: "shopB", Amount: 500, ID: first}); !errors.Is(err, ledger.ErrIDReused) || d.Allowed {
			t.Errorf("PayID(order-1, shopB) = %+v, %v; want ErrIDReused", d, err)
		}
		if d, err := c.Pay(ctx, r, ledger.Payment{From: "cust", To: "shopA", Amount: 500, ID: first}); err != nil || !d.Allowed {
			t.Errorf("PayID(order-1, shopA) again = %+v, %v; want paid (the same payment)", d, err)
		}
		holds("shopA", 500)
		holds("shopB", 0)
		holds("cust", 500)

		// Denied first (over the limit), then paid: the later attempt's
		// marker names the payee.
		second := ledger.KeyID(b.Key("order-2"))
		if d, err := c.Pay(ctx, r, ledger.Payment{From: "cust", To: "shopA", Amount: 600, ID: second}); err != nil || d.Allowed {
			t.Fatalf("PayID(order-2, 600) with 500 of the limit used = %+v, %v; want denied", d, err)
		}
		if err := c.SetLimit(ctx, r, "cust", 2000); err != nil {
			t.Fatal(err)
		}
		fund(500)
		if d, err := c.Pay(ctx, r, ledger.Payment{From: "cust", To: "shopA", Amount: 600, ID: second}); err != nil || !d.Allowed {
			t.Fatalf("PayID(order-2) once the limit is raised = %+v, %v; want paid", d, err)
		}
		if d, err := c.Pay(ctx, r, ledger.Payment{From: "cust", To: "shopB", Amount: 600, ID: second}); !errors.Is(err, ledger.ErrIDReused) || d.Allowed {
			t.Errorf("PayID(order-2, shopB) = %+v, %v; want ErrIDReused", d, err)
		}
		holds("shopA", 1100)
		holds("shopB", 0)
		holds("cust", 400)
	})
}

// A reservation made under an ID is one reservation, found again by its ID
// even when an earlier attempt was denied.
func TestReservationIDs(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 1})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "u", Limit: 1}); err != nil {
			t.Fatal(err)
		}
		held, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 1})
		if err != nil || !held.OK() {
			t.Fatalf("Reserve = %+v, %v", held, err)
		}
		id := ledger.KeyID(b.Key("job-7"))
		if rv, err := c.Reserve(ctx, r, ledger.Request{User: "u", Amount: 1, ID: id}); err != nil || rv.OK() {
			t.Fatalf("Reserve under %s with nothing left = %+v, %v; want denied", id, rv, err)
		}
		if err := held.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		var rvs []*ledger.Reservation
		for i := 0; i < 2; i++ {
			rv, err := ledger.New(b.Client).Reserve(ctx, r, ledger.Request{User: "u", Amount: 1, ID: id})
			if err != nil || !rv.OK() {
				t.Fatalf("Reserve #%d under %s after a cancel = %+v, %v; want reserved", i+1, id, rv, err)
			}
			rvs = append(rvs, rv)
		}
		if u := inspect(t, c, r, "u"); u.InFlight != 1 {
			t.Fatalf("in flight %d, want 1: one reservation", u.InFlight)
		}
		if err := rvs[1].Cancel(ctx); err != nil { // the second call's handle ends the one hold
			t.Fatal(err)
		}
		if u := inspect(t, c, r, "u"); u.InFlight != 0 {
			t.Fatalf("in flight %d after Cancel, want 0", u.InFlight)
		}
	})
}

// A fund that would take a currency's supply beyond what 64 bits count is
// refused and writes nothing; what was funded stays readable. A fund made
// under an ID before its user existed is made once the user exists.
func TestFundLimitsAndIDs(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 1000})
		id := ledger.KeyID(b.Key("top-up-1"))
		if err := c.Fund(ctx, r.Currency, ledger.Request{User: "alice", Amount: 5, ID: id}); !errors.Is(err, ledger.ErrUnknownUser) {
			t.Fatalf("Fund of a user without an account = %v, want ErrUnknownUser", err)
		}
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "alice", Limit: 1000}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := c.Fund(ctx, r.Currency, ledger.Request{User: "alice", Amount: 5, ID: id}); err != nil {
				t.Fatalf("Fund #%d under %s = %v", i+1, id, err)
			}
		}
		if f, err := c.Funds(ctx, r.Currency, "alice"); err != nil || f != 5 {
			t.Fatalf("alice holds %d, %v; want 5: funded once", f, err)
		}
		big := uint64(ledger.MaxSupply) - 5
		if err := c.Fund(ctx, r.Currency, ledger.Request{User: "alice", Amount: big}); err != nil {
			t.Fatalf("Fund up to MaxSupply = %v", err)
		}
		if err := c.Fund(ctx, r.Currency, ledger.Request{User: "alice", Amount: 1}); !errors.Is(err, ledger.ErrInvalidAmount) {
			t.Fatalf("Fund beyond MaxSupply = %v, want ErrInvalidAmount", err)
		}
		if f, err := c.Funds(ctx, r.Currency, "alice"); err != nil || f != ledger.MaxSupply {
			t.Fatalf("alice holds %d, %v; want %d, unchanged by the refused fund", f, err, uint64(ledger.MaxSupply))
		}
	})
}

// A payment whose request was applied twice (sent again, as after an
// eviction, and answered by the second application: its hold exists) is
// answered paid, once. An unnamed one is this call's own, its transfers'
// IDs new, and is answered without a read; a named one is checked against
// the payment its ID names (one read).
func TestPaymentAppliedTwiceIsPaidOnce(t *testing.T) {
	engine := embedded.New()
	t.Cleanup(engine.Close)
	b := &testenv.Backend{Client: engine}
	c0, r := setup(t, b, ledger.Resource{Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 1000})
	if err := c0.Provision(ctx, r, ledger.UserLimit{Key: "cust", Limit: 1000}, ledger.UserLimit{Key: "shop"}); err != nil {
		t.Fatal(err)
	}
	if err := c0.Fund(ctx, r.Currency, ledger.Request{User: "cust", Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	sim := simnet.New(engine, quick, simnet.WithFaults(simnet.Faults{Duplicate: 1}))
	t.Cleanup(sim.Close)
	c := ledger.New(sim)
	for i, id := range []ledger.ID{{}, ledger.KeyID(t.Name())} {
		before := c.Stats().LookupTransfers.Requests
		d, err := c.Pay(ctx, r, ledger.Payment{From: "cust", To: "shop", Amount: 100, ID: id})
		if err != nil || !d.Allowed {
			t.Fatalf("Pay(ID %v) applied twice = %+v, %v; want paid", id, d, err)
		}
		if !id.IsZero() && d.ID != id {
			t.Errorf("Pay(ID %v) answered as %v", id, d.ID)
		}
		reads := c.Stats().LookupTransfers.Requests - before
		if want := uint64(min(i, 1)); reads != want {
			t.Errorf("Pay(ID %v) applied twice read transfers %d times, want %d", id, reads, want)
		}
		if f, err := c0.Funds(ctx, r.Currency, "shop"); err != nil || f != 100*uint64(i+1) {
			t.Errorf("after %d payments the shop holds %d, %v; want %d", i+1, f, err, 100*(i+1))
		}
	}
}
