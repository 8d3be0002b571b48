package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// freeAddress returns a loopback address where nothing listens.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentAddress returns a loopback address that accepts connections and
// reads everything but never answers: what a client sees of a cluster with
// another cluster ID.
func silentAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, conn); conn.Close() }()
		}
	}()
	return l.Addr().String()
}

func TestUnavailableCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts TigerBeetle clients that wait for deadlines")
	}
	r := ledger.Resource{Name: "r", Ledger: 1, Kind: ledger.KindRequests, Window: time.Second, DefaultLimit: 1, Lazy: true}
	const deadline = 300 * time.Millisecond
	const margin = 2 * time.Second // generous: this checks "does not hang", not speed
	for _, addr := range []struct{ name, addr string }{
		{"nothing listens", freeAddress(t)},
		{"wrong cluster (never answers)", silentAddress(t)},
	} {
		for _, policy := range []ledger.OnUnavailable{ledger.ReturnError, ledger.FailOpen, ledger.FailClosed} {
			t.Run(addr.name+"/"+policy.String(), func(t *testing.T) {
				c, err := ledger.Dial(0, []string{addr.addr}, ledger.WithUnavailable(policy))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				start := time.Now()
				d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 1})
				if took := time.Since(start); took > deadline+margin {
					t.Fatalf("Acquire took %v with a %v deadline", took, deadline)
				}
				switch policy {
				case ledger.ReturnError:
					if !errors.Is(err, ledger.ErrUnavailable) || d.Allowed {
						t.Fatalf("Acquire = %+v, %v; want ErrUnavailable", d, err)
					}
					if id, ok := ledger.AttemptID(err); !ok || id != d.ID || id.IsZero() {
						t.Fatalf("AttemptID(%v) = %v, %v; want the decision's ID %v", err, id, ok, d.ID)
					}
				case ledger.FailOpen, ledger.FailClosed:
					if err != nil || d.Allowed != (policy == ledger.FailOpen) || d.Reason != ledger.Unavailable {
						t.Fatalf("Acquire = %+v, %v; want Allowed=%v, Reason unavailable", d, err, policy == ledger.FailOpen)
					}
				}
				// Money is never paid open.
				m := ledger.Resource{Name: "m", Ledger: 2, Kind: ledger.KindMoney, Window: time.Hour, Currency: 3}
				ctx2, cancel2 := context.WithTimeout(context.Background(), deadline)
				defer cancel2()
				if d, err := c.Pay(ctx2, m, ledger.Payment{From: "a", To: "b", Amount: 1}); !errors.Is(err, ledger.ErrUnavailable) || d.Allowed {
					t.Fatalf("Pay = %+v, %v; want ErrUnavailable", d, err)
				}
			})
		}
	}
	t.Run("default timeout without a deadline", func(t *testing.T) {
		c, err := ledger.Dial(0, []string{freeAddress(t)}, ledger.WithTimeout(deadline))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		if err := c.Ping(context.Background()); !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("Ping = %v, want ErrUnavailable", err)
		}
		if took := time.Since(start); took > deadline+margin {
			t.Fatalf("Ping took %v with a %v default timeout", took, deadline)
		}
	})
	t.Run("bounded waiting calls", func(t *testing.T) {
		c, err := ledger.Dial(0, []string{freeAddress(t)}, ledger.WithMaxWaiting(1))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		_ = c.Ping(ctx) // leaves one call waiting for the cluster
		start := time.Now()
		if err := c.Ping(context.Background()); !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("Ping = %v, want ErrUnavailable at once", err)
		}
		if took := time.Since(start); took > margin {
			t.Fatalf("Ping with no room to wait took %v", took)
		}
	})
}

func TestIDRoundTrip(t *testing.T) {
	id := ledger.NewID()
	got, err := ledger.ParseID(id.String())
	if err != nil || got != id {
		t.Fatalf("ParseID(%s) = %v, %v", id, got, err)
	}
	for _, s := range []string{"", "xyz", "123456789012345678901234567890123"} {
		if _, err := ledger.ParseID(s); !errors.Is(err, ledger.ErrInvalidID) {
			t.Errorf("ParseID(%q) error = %v", s, err)
		}
	}
	if a, b := ledger.UserID(1, "k"), ledger.UserID(2, "k"); a == b {
		t.Fatal("user IDs on two ledgers collide")
	}
	if a, b := ledger.UserID(1, "k"), ledger.CurrencyUserID(1, "k"); a == b {
		t.Fatal("limit and currency accounts collide")
	}
}

func FuzzWindowSeconds(f *testing.F) {
	for _, d := range []int64{0, 1, int64(time.Second), int64(1500 * time.Millisecond), int64(ledger.MaxWindow), int64(ledger.MaxWindow) + int64(time.Second), -1} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, ns int64) {
		w := time.Duration(ns)
		secs, err := ledger.WindowSeconds(w)
		ok := w >= time.Second && w%time.Second == 0 && w <= ledger.MaxWindow
		if (err == nil) != ok {
			t.Fatalf("WindowSeconds(%v) = %d, %v; valid = %v", w, secs, err, ok)
		}
		if err == nil && time.Duration(secs)*time.Second != w {
			t.Fatalf("WindowSeconds(%v) = %d, not the same window", w, secs)
		}
	})
}

func FuzzParseID(f *testing.F) {
	f.Add("0")
	f.Add("ffffffffffffffffffffffffffffffff")
	f.Add("abc")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ledger.ParseID(s)
		if err != nil {
			return
		}
		again, err := ledger.ParseID(id.String())
		if err != nil || again != id {
			t.Fatalf("ParseID(%q) = %v; round trip %v, %v", s, id, again, err)
		}
	})
}

func TestWithUnavailableRefusesNonPolicies(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "want ReturnError, FailOpen or FailClosed") {
			t.Errorf("New with WithUnavailable(FailOpen|FailClosed) recovered %v, want a panic naming the policies", r)
		}
	}()
	ledger.New(nil, ledger.WithUnavailable(ledger.FailOpen|ledger.FailClosed))
}

// The zero Reason means no decision: the Decision a call returns with its
// error says nothing was admitted or refused.
func TestZeroReasonIsUndecided(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Minute, DefaultLimit: 3, Lazy: true})
		d, err := c.Acquire(ctx, r, ledger.Request{User: "u", Amount: 0})
		if err == nil || d.Reason != ledger.Undecided || d.Reason.String() != "undecided" || d.Allowed {
			t.Errorf("Acquire of 0 units = %+v (%v), %v; want an error and an undecided Decision", d, d.Reason, err)
		}
		if d := acquire(t, c, r, "u", 1); !d.Allowed || d.Reason != ledger.Admitted {
			t.Errorf("Acquire of 1 = %+v, want admitted with Reason Admitted", d)
		}
	})
}
