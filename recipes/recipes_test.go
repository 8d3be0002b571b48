package recipes_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/recipes"
	"github.com/tblimit/tblimit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// window returns w on the embedded engine, whose clock the test moves, and a
// short real window on a real server, where the test has to wait it out.
func window(b *testenv.Backend, w time.Duration) time.Duration {
	if b.Real {
		return 2 * time.Second
	}
	return w
}

func mustAllow(t *testing.T, ctx context.Context, name string, d recipes.Result, err error, want bool) recipes.Result {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: error %v", name, err)
	}
	if d.Allowed != want {
		t.Fatalf("%s = %+v, want Allowed=%v", name, d, want)
	}
	return d
}

// The first seed scenario: 10 requests a minute. The 11th is denied; after
// the window all 10 are back.
func TestSeedRequestsPerMinute(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		w := window(b, time.Minute)
		rl, err := recipes.NewRequestRate(ledger.New(b.Client), recipes.Config{Name: "api", Ledger: b.NewLedger()}, recipes.Per(10, w))
		if err != nil {
			t.Fatal(err)
		}
		if err := rl.Create(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rl.AddUser(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 10; i++ {
			d, err := rl.Allow(ctx, "alice")
			d = mustAllow(t, ctx, fmt.Sprintf("Allow #%d", i), d, err, true)
			if d.Remaining != uint64(10-i) || d.Limit != 10 {
				t.Fatalf("Allow #%d: Remaining, Limit = %d, %d, want %d, 10", i, d.Remaining, d.Limit, 10-i)
			}
		}
		d, err := rl.Allow(ctx, "alice")
		d = mustAllow(t, ctx, "Allow #11", d, err, false)
		if d.Reason != ledger.LimitExceeded || d.Remaining != 0 {
			t.Fatalf("Allow #11 = %+v, want LimitExceeded with 0 remaining", d)
		}
		if d.RetryAfter <= 0 || d.RetryAfter > w {
			t.Fatalf("Allow #11: RetryAfter = %v, want in (0, %v]", d.RetryAfter, w)
		}
		if d.ResetAfter < d.RetryAfter || d.ResetAfter > w {
			t.Fatalf("Allow #11: ResetAfter = %v, want in [%v, %v]", d.ResetAfter, d.RetryAfter, w)
		}
		// Another user is not affected.
		d, err = rl.Allow(ctx, "bob")
		if err == nil || !errors.Is(err, ledger.ErrUnknownUser) {
			t.Fatalf("Allow(bob) = %+v, %v; want ErrUnknownUser", d, err)
		}
		b.Advance(t, w+time.Millisecond) // units return one window after their own timestamp
		waitAvailable(t, b, rl, "alice", 10)
		for i := 1; i <= 10; i++ {
			d, err := rl.Allow(ctx, "alice")
			mustAllow(t, ctx, fmt.Sprintf("after the window: Allow #%d", i), d, err, true)
		}
		d, err = rl.Allow(ctx, "alice")
		mustAllow(t, ctx, "after the window: Allow #11", d, err, false)
	})
}

// waitAvailable waits (on a real server, which frees expired units shortly
// after their expiry) until key has want units available.
func waitAvailable(t *testing.T, b *testenv.Backend, l interface {
	Inspect(context.Context, string) (recipes.Usage, error)
}, key string, want uint64) {
	t.Helper()
	for i := 0; ; i++ {
		u, err := l.Inspect(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if u.Available == want {
			return
		}
		if !b.Real || i == 50 {
			t.Fatalf("Inspect(%s) = %+v, want %d available", key, u, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The second seed scenario: 10,000,000 bytes a minute, requests of varying
// size: one larger than what is left is denied, smaller ones still fit.
func TestSeedBytesPerMinute(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		w := window(b, time.Minute)
		bw, err := recipes.NewBandwidth(ledger.New(b.Client), recipes.Config{Name: "upload", Ledger: b.NewLedger(), Lazy: true}, recipes.Bytes(10_000_000).Per(w))
		if err != nil {
			t.Fatal(err)
		}
		if err := bw.Create(ctx); err != nil {
			t.Fatal(err)
		}
		left := uint64(10_000_000)
		for _, step := range []struct {
			size  uint64
			allow bool
		}{
			{4_000_000, true},
			{3_500_000, true},
			{1_500_000, true},
			{1_000_001, false}, // 1,000,000 left
			{2_000_000, false},
			{600_000, true},
			{400_001, false}, // 400,000 left
			{400_000, true},
			{1, false},
		} {
			d, err := bw.AllowN(ctx, "carol", step.size)
			d = mustAllow(t, ctx, fmt.Sprintf("AllowN(carol, %d)", step.size), d, err, step.allow)
			if step.allow {
				left -= step.size
			}
			if d.Remaining != left {
				t.Fatalf("AllowN(carol, %d): Remaining = %d, want %d", step.size, d.Remaining, left)
			}
		}
		d, err := bw.AllowN(ctx, "carol", 10_000_001)
		d = mustAllow(t, ctx, "AllowN(carol, 10000001)", d, err, false)
		if d.RetryAfter >= 0 {
			t.Fatalf("a request larger than the limit: RetryAfter = %v, want < 0 (never)", d.RetryAfter)
		}
		b.Advance(t, w+time.Millisecond)
		waitAvailable(t, b, bw, "carol", 10_000_000)
		d, err = bw.AllowN(ctx, "carol", 10_000_000)
		mustAllow(t, ctx, "after the window: AllowN(carol, 10000000)", d, err, true)
	})
}

// The third seed scenario: 1000 USD a day with the linked USD transfer.
func TestSeedMoneyPerDay(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		usd := b.NewLedger()
		m, err := recipes.NewMoneyPerWindow(ledger.New(b.Client), recipes.Config{Name: "usd-daily", Ledger: b.NewLedger()}, usd, recipes.Amount(1000_00).Per(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Create(ctx); err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"dave", "shop", "erin"} {
			if err := m.AddUser(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Fund(ctx, "dave", 5000_00); err != nil {
			t.Fatal(err)
		}
		if err := m.Fund(ctx, "erin", 100_00); err != nil {
			t.Fatal(err)
		}
		funds := func(key string, want uint64) {
			t.Helper()
			got, err := m.Funds(ctx, key)
			if err != nil || got != want {
				t.Fatalf("Funds(%s) = %d, %v, want %d", key, got, err, want)
			}
		}
		available := func(key string, want uint64) {
			t.Helper()
			u, err := m.Inspect(ctx, key)
			if err != nil || u.Available != want {
				t.Fatalf("Inspect(%s) = %+v, %v, want %d available", key, u, err, want)
			}
		}
		d, err := m.Pay(ctx, "dave", "shop", 600_00)
		mustAllow(t, ctx, "Pay(dave, 600)", d, err, true)
		funds("dave", 4400_00)
		funds("shop", 600_00)
		available("dave", 400_00)

		// Over the limit: both fail, the USD balances are unchanged.
		d, err = m.Pay(ctx, "dave", "shop", 600_00)
		d = mustAllow(t, ctx, "Pay(dave, 600) again", d, err, false)
		if d.Reason != ledger.LimitExceeded {
			t.Fatalf("Pay(dave, 600) again: Reason = %v, want limit exceeded", d.Reason)
		}
		funds("dave", 4400_00)
		funds("shop", 600_00)
		available("dave", 400_00)
		d, err = m.Pay(ctx, "dave", "shop", 400_00)
		mustAllow(t, ctx, "Pay(dave, 400)", d, err, true)
		funds("dave", 4000_00)
		available("dave", 0)

		// Insufficient USD: both fail, no limit is consumed.
		d, err = m.Pay(ctx, "erin", "shop", 150_00)
		d = mustAllow(t, ctx, "Pay(erin, 150)", d, err, false)
		if d.Reason != ledger.InsufficientFunds || d.RetryAfter != 0 {
			t.Fatalf("Pay(erin, 150) = %+v, want insufficient funds, RetryAfter 0", d)
		}
		funds("erin", 100_00)
		funds("shop", 1000_00)
		available("erin", 1000_00)
		d, err = m.Pay(ctx, "erin", "shop", 100_00)
		mustAllow(t, ctx, "Pay(erin, 100)", d, err, true)
		funds("erin", 0)
		available("erin", 900_00)
	})
}

func TestLimitValidation(t *testing.T) {
	c := ledger.New(nil)
	for _, l := range []recipes.Limit{
		recipes.Per(10, 0),
		recipes.Per(10, 500*time.Millisecond),
		recipes.Per(10, 1500*time.Millisecond),
		recipes.Per(10, ledger.MaxWindow+time.Second),
		recipes.Per(10, -time.Second),
	} {
		if _, err := recipes.NewRequestRate(c, recipes.Config{Name: "x", Ledger: 1}, l); err == nil || !errors.Is(err, ledger.ErrInvalidWindow) {
			t.Errorf("NewRequestRate(%v) error = %v, want ErrInvalidWindow", l, err)
		}
	}
	if _, err := recipes.NewRequestRate(c, recipes.Config{Name: "", Ledger: 1}, recipes.PerMinute(1)); !errors.Is(err, ledger.ErrInvalidResource) {
		t.Errorf("empty name: error = %v, want ErrInvalidResource", err)
	}
	if _, err := recipes.NewMoneyPerWindow(c, recipes.Config{Name: "m", Ledger: 1, Lazy: true}, 2, recipes.PerDay(1)); !errors.Is(err, ledger.ErrInvalidResource) {
		t.Errorf("lazy money: error = %v, want ErrInvalidResource", err)
	}
	if got := recipes.Bytes(10 << 20).Per(time.Minute).String(); got != "10485760 per 1m0s" {
		t.Errorf("String() = %q", got)
	}
}

// A payment made under an order's ID is made once, however often retried.
func TestPayID(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		ctx := context.Background()
		daily, err := recipes.NewMoneyPerWindow(ledger.New(b.Client), recipes.Config{Name: "payid", Ledger: b.NewLedger()}, b.NewLedger(), recipes.Amount(1000).Per(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if err := daily.Create(ctx); err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"carol", "shop"} {
			if err := daily.AddUser(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
		if err := daily.Fund(ctx, "carol", 500); err != nil {
			t.Fatal(err)
		}
		id := ledger.KeyID(b.Key("order-7"))
		for i := 0; i < 3; i++ {
			if d, err := daily.PayID(ctx, id, "carol", "shop", 200); err != nil || !d.Allowed || d.ID != id {
				t.Fatalf("PayID #%d = %+v, %v", i+1, d, err)
			}
		}
		if f, err := daily.Funds(ctx, "carol"); err != nil || f != 300 {
			t.Fatalf("carol holds %d, %v; want 300: paid once", f, err)
		}
	})
}

// The single-limit recipes speak the Limiter's vocabulary: Wait, Peek and
// Reset.
func TestRecipesWaitPeekReset(t *testing.T) {
	c := ledger.New(embedded.New()) // real time: Wait sleeps for real
	rr, err := recipes.NewRequestRate(c, recipes.Config{Name: "rr", Ledger: 1, Lazy: true}, recipes.PerSecond(2))
	if err != nil {
		t.Fatal(err)
	}
	bw, err := recipes.NewBandwidth(c, recipes.Config{Name: "bw", Ledger: 2, Lazy: true}, recipes.Bytes(100).Per(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, create := range []func(context.Context) error{rr.Create, bw.Create} {
		if err := create(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if d, err := rr.Wait(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("Wait with room = %+v, %v", d, err)
		}
	}
	if u, err := rr.Peek(ctx, "k"); err != nil || u.InFlight != 2 || u.Available != 0 {
		t.Fatalf("Peek = %+v, %v; want 2 in flight, none available", u, err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = rr.Wait(short, "k")
	cancel()
	if !errors.Is(err, recipes.ErrWouldExceedDeadline) {
		t.Errorf("Wait with a 100 ms deadline and a unit back in about 1 s = %v, want ErrWouldExceedDeadline", err)
	}
	start := time.Now()
	if d, err := rr.Wait(ctx, "k"); err != nil || !d.Allowed || time.Since(start) < 500*time.Millisecond {
		t.Errorf("Wait = %+v, %v after %v; want admitted once a unit returned", d, err, time.Since(start))
	}
	if _, err := bw.WaitN(ctx, "k", 101); !errors.Is(err, recipes.ErrExceedsLimit) {
		t.Errorf("WaitN of 101 bytes under 100 = %v, want ErrExceedsLimit", err)
	}
	if n, err := rr.Reset(ctx, "k"); err != nil || n == 0 {
		t.Errorf("Reset = %d, %v; want the holds ended", n, err)
	}
	if d, err := rr.Allow(ctx, "k"); err != nil || !d.Allowed {
		t.Errorf("Allow after Reset = %+v, %v; want admitted", d, err)
	}
}
