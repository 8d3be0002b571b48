package ratelimit_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// clientsPerHour limits each client to 5 requests an hour.
const clientsPerHour = `
domain: DOMAIN
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 5}
`

// Keys as a gateway sends them, most never seen: a first sight costs one
// create_accounts and one create, a known key one create, and a check
// (hits_addend 0) of a key never seen writes nothing and reads its account
// once; of a key the service knows, nothing at all.
func TestKeysAsTheyArrive(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c := ledger.New(b.Client, ledger.WithNow(b.Now))
		e := start(t, b, c, clientsPerHour)
		e.ask(desc("client", "warm")) // the rule's resource is checked once
		const n = 10
		before := c.Stats()
		for i := range n {
			if r := e.ask(desc("client", fmt.Sprint("new-", i))); codesOf(r) != "OK: OK" || r.GetStatuses()[0].GetLimitRemaining() != 4 {
				t.Fatalf("first sight %d = %v, want OK with 4 left", i, r)
			}
		}
		after := c.Stats()
		if a, tr, rd := after.CreateAccounts.Requests-before.CreateAccounts.Requests, after.CreateTransfers.Requests-before.CreateTransfers.Requests,
			after.LookupAccounts.Requests-before.LookupAccounts.Requests; a != n || tr != n || rd != 0 {
			t.Errorf("%d first sights: %d create_accounts, %d create_transfers, %d lookups; want %d, %d, 0", n, a, tr, rd, n, n)
		}
		check := func(v string) *rlcommon.RateLimitDescriptor {
			d := desc("client", v)
			d.HitsAddend = wrapperspb.UInt64(0)
			return d
		}
		before = c.Stats()
		for i := range n {
			if r := e.ask(check(fmt.Sprint("new-", i))); codesOf(r) != "OK: OK" || r.GetStatuses()[0].GetLimitRemaining() != 4 {
				t.Fatalf("check of known key %d = %v, want OK with 4 left", i, r)
			}
		}
		if s := c.Stats(); s != before {
			t.Errorf("checks of keys the service knows sent requests: before %+v, after %+v", before, s)
		}
		before = c.Stats()
		if r := e.ask(check("never-seen")); codesOf(r) != "OK: OK" || r.GetStatuses()[0].GetLimitRemaining() != 5 {
			t.Fatalf("check of a key never seen = %v, want OK with 5 left", r)
		}
		after = c.Stats()
		if a, tr, rd := after.CreateAccounts.Requests-before.CreateAccounts.Requests, after.CreateTransfers.Requests-before.CreateTransfers.Requests,
			after.LookupAccounts.Requests-before.LookupAccounts.Requests; a != 0 || tr != 0 || rd != 1 {
			t.Errorf("check of a key never seen: %d create_accounts, %d create_transfers, %d lookups; want 0, 0, 1", a, tr, rd)
		}
	})
}

// /metrics has what the service's Client sent to TigerBeetle and how long
// its calls took, so that an operator reads requests per decision off it.
func TestMetricsShowClusterRequests(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c := ledger.New(b.Client, ledger.WithNow(b.Now))
		e := start(t, b, c, clientsPerHour)
		for i := range 4 {
			e.ask(desc("client", fmt.Sprint("m", i)))
		}
		resp, err := http.Get(e.http + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		value := func(series string) float64 {
			t.Helper()
			m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
			if m == nil {
				t.Fatalf("/metrics has no %s:\n%s", series, body)
			}
			v, _ := strconv.ParseFloat(string(m[1]), 64)
			return v
		}
		st := c.Stats()
		if got := value(`tblimit_tigerbeetle_requests_total{operation="create_transfers"}`); got != float64(st.CreateTransfers.Requests) || got < 4 {
			t.Errorf("create_transfers requests on /metrics = %v, want the Client's %d", got, st.CreateTransfers.Requests)
		}
		if got := value(`tblimit_tigerbeetle_requests_total{operation="create_accounts"}`); got != float64(st.CreateAccounts.Requests) || got < 4 {
			t.Errorf("create_accounts requests on /metrics = %v, want the Client's %d", got, st.CreateAccounts.Requests)
		}
		if got := value(`tblimit_ratelimit_call_duration_seconds_count{code="OK"}`); got != 4 {
			t.Errorf("calls timed = %v, want 4", got)
		}
	})
}
