package ratelimit_test

import (
	"context"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// hits is d with its own hits_addend.
func hits(n uint64, d *rlcommon.RateLimitDescriptor) *rlcommon.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func remaining(r *rls.RateLimitResponse) uint32 { return r.GetStatuses()[0].GetLimitRemaining() }

// Check then charge, as AI gateways do it: the check (hits_addend 0) before
// the call holds what the rule's calls cost lately, and the call's tokens
// charged after it settle that hold. A charge is recorded even past the
// limit, so the checks that follow are refused until the tokens return.
func TestChargeAfterIsNeverLost(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000, charge_after: true}
`)
		check := func(user string) *rls.RateLimitResponse { return e.ask(hits(0, desc("user", user))) }
		if r := check("alice"); codesOf(r) != "OK: OK" || remaining(r) != 875 {
			t.Fatalf("first check = %s, %d left; want OK, holding an eighth of the limit (no call has cost anything yet)", codesOf(r), remaining(r))
		}
		if r := e.ask(hits(600, desc("user", "alice"))); codesOf(r) != "OK: OK" || remaining(r) != 400 {
			t.Fatalf("charge 600 = %s, %d left; want OK, 400 left", codesOf(r), remaining(r))
		}
		// Calls cost 600 lately: a check holds 600 until its charge.
		if r := check("alice"); codesOf(r) != "OVER_LIMIT: OVER_LIMIT" {
			t.Fatalf("check with 400 left when calls cost 600 = %s, want OVER_LIMIT", codesOf(r))
		}
		if r := check("bob"); codesOf(r) != "OK: OK" || remaining(r) != 400 {
			t.Fatalf("bob's check = %s, %d left; want OK, holding 600", codesOf(r), remaining(r))
		}
		if r := e.ask(hits(100, desc("user", "bob"))); codesOf(r) != "OK: OK" {
			t.Fatalf("bob's charge of 100 = %s, want OK", codesOf(r))
		}
		res, _ := e.svc.Resource(mustRule(t, e.svc))
		if u, err := ledger.New(b.Client, ledger.WithNow(b.Now)).Inspect(context.Background(), res, "bob"); err != nil || u.Available != 900 {
			t.Fatalf("bob after a charge of 100 = %+v, %v; want the check's 600 settled to 100, 900 left", u, err)
		}
		// More than remains, with no check: recorded, taking what remains.
		if r := e.ask(hits(1500, desc("user", "alice"))); codesOf(r) != "OK: OK" || remaining(r) != 0 {
			t.Fatalf("charge 1500 with 400 left = %s, %d left; want recorded (OK), 0 left", codesOf(r), remaining(r))
		}
		if r := check("alice"); codesOf(r) != "OVER_LIMIT: OVER_LIMIT" {
			t.Fatalf("check after the limit was charged whole = %s, want OVER_LIMIT", codesOf(r))
		}
		if r := e.ask(hits(5, desc("user", "alice"))); codesOf(r) != "OK: OK" {
			t.Fatalf("a charge with nothing left = %s, want OK (recorded)", codesOf(r))
		}
		if b.Real {
			return
		}
		b.Advance(t, time.Hour+2*time.Second)
		if r := check("alice"); codesOf(r) != "OK: OK" {
			t.Fatalf("check an hour later = %s, want OK: the charges returned", codesOf(r))
		}
	})
}

// A check and its charge paired by the request's ID: the check holds the
// most the call may cost, the charge settles it to what the call cost,
// kept for the window, the rest back at once; a charge sent again counts
// once; more than was held is charged; a charge whose check is unknown is
// charged whole.
func TestPairedCheckAndCharge(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 10000, reserve_key: check, settle_key: charge}
`)
		ask := func(n uint64, kv ...string) *rls.RateLimitResponse {
			t.Helper()
			return e.ask(hits(n, desc(append([]string{"user", "alice"}, kv...)...)))
		}
		if r := ask(4000, "check", "req-1"); codesOf(r) != "OK: OK" || remaining(r) != 6000 {
			t.Fatalf("check holding 4000 = %s, %d left; want OK, 6000", codesOf(r), remaining(r))
		}
		if r := ask(4000, "check", "req-1"); codesOf(r) != "OK: OK" {
			t.Fatalf("the check sent again = %s, want OK", codesOf(r))
		}
		if r := ask(7000, "check", "req-2"); codesOf(r) != "OVER_LIMIT: OVER_LIMIT" {
			t.Fatalf("check of 7000 with 6000 left = %s, want OVER_LIMIT", codesOf(r))
		}
		for range 2 { // sent again: settled once
			if r := ask(1200, "charge", "req-1"); codesOf(r) != "OK: OK" {
				t.Fatalf("charge 1200 of the 4000 held = %s, want OK", codesOf(r))
			}
		}
		if r := ask(0, "check", "probe"); codesOf(r) != "OK: OK" || remaining(r) != 8800 {
			t.Fatalf("after settling 4000 to 1200: %s, %d left; want 8800", codesOf(r), remaining(r))
		}
		// A charge above its hold: the excess is charged.
		ask(1000, "check", "req-3")
		ask(1500, "charge", "req-3")
		if r := ask(0, "check", "probe"); remaining(r) != 7300 {
			t.Fatalf("after a charge of 1500 on a hold of 1000: %d left, want 7300", remaining(r))
		}
		// A charge whose check never came is charged whole, past the limit.
		if r := ask(9000, "charge", "orphan"); codesOf(r) != "OK: OK" || remaining(r) != 0 {
			t.Fatalf("an orphan charge of 9000 with 7300 left = %s, %d left; want recorded, 0 left", codesOf(r), remaining(r))
		}
		if r := ask(1, "check", "req-4"); codesOf(r) != "OVER_LIMIT: OVER_LIMIT" {
			t.Fatalf("check after the limit was charged whole = %s, want OVER_LIMIT", codesOf(r))
		}
		// The request's ID is required, once.
		for _, d := range []*rlcommon.RateLimitDescriptor{
			hits(5, desc("user", "alice")),
			hits(5, desc("user", "alice", "check", "x", "charge", "x")),
			hits(5, desc("user", "alice", "check", "")),
		} {
			_, err := e.call(&rls.RateLimitRequest{Domain: e.domain, Descriptors: []*rlcommon.RateLimitDescriptor{d}})
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("descriptor %v = %v, want INVALID_ARGUMENT", d, err)
			}
		}
	})
}

// A paired check held in a request that another descriptor refused is
// given back; the call did not go ahead, but a charge that comes for it all
// the same is recorded, not taken for a charge sent again.
func TestChargeOfAReleasedCheck(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 10000, reserve_key: check, settle_key: charge}
  - key: route
    rate_limit: {unit: hour, requests_per_unit: 1}
`)
		if got := codesOf(e.ask(desc("route", "r"))); got != "OK: OK" {
			t.Fatalf("route's only request = %s", got)
		}
		r := e.ask(hits(4000, desc("user", "alice", "check", "req-1")), desc("route", "r"))
		if codesOf(r) != "OVER_LIMIT: OK OVER_LIMIT" {
			t.Fatalf("check with a refused route = %s, want OVER_LIMIT: OK OVER_LIMIT", codesOf(r))
		}
		if r := e.ask(hits(300, desc("user", "alice", "charge", "req-1"))); codesOf(r) != "OK: OK" {
			t.Fatalf("its charge = %s, want OK", codesOf(r))
		}
		res, _ := e.svc.Resource(mustRule(t, e.svc)) // the first rule: user
		if u, err := ledger.New(b.Client, ledger.WithNow(b.Now)).Inspect(context.Background(), res, "alice"); err != nil || u.InFlight != 300 {
			t.Fatalf("alice after the released check and a charge of 300 = %+v, %v; want 300 in flight", u, err)
		}
	})
}
