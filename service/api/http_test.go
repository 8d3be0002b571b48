package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

// answer is an HTTP response: its status, Retry-After and body.
type answer struct {
	code  int
	retry string
	body  string
}

// post POSTs body to path, with header name/value pairs.
func (e *env) post(path, body string, header ...string) answer {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx(e.t), http.MethodPost, e.http+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return answer{code: resp.StatusCode, retry: resp.Header.Get("Retry-After"), body: string(b)}
}

// field is the JSON value at a dotted path of body ("decision.allowed").
func field(t *testing.T, body, path string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				t.Fatalf("body %s has no %s", body, path)
			}
			v = x[i]
		default:
			t.Fatalf("body %s has no %s", body, path)
		}
	}
	return v
}

// Every call over HTTP, in the protobuf JSON mapping, with the status a
// client expects: 200 admitted, 429 with Retry-After denied, 402 short of
// funds, 400/404/409 for the errors.
func TestHTTP(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b)
		rate := e.resource(ledger.Resource{Window: time.Minute, DefaultLimit: 2, Lazy: true})
		money := e.resource(ledger.Resource{Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 100})
		if err := e.c.Provision(ctx(t), money, ledger.UserLimit{Key: "alice", Limit: 100}, ledger.UserLimit{Key: "shop", Limit: 100}); err != nil {
			t.Fatal(err)
		}
		R, M := rate.Name, money.Name
		steps := []struct {
			path, body string
			code       int
			check      string // a dotted field, "=" and its JSON value
		}{
			{"/v1/acquire", `{"resource":"` + R + `","user":"u"}`, 200, `decision.remaining="1"`},
			{"/v1/peek", `{"resource":"` + R + `","user":"u"}`, 200, `decision.allowed=true`},
			{"/v1/acquire", `{"resource":"` + R + `","user":"u","requestId":"` + b.Key("r1") + `"}`, 200, `decision.allowed=true`},
			{"/v1/acquire", `{"resource":"` + R + `","user":"u","requestId":"` + b.Key("r1") + `"}`, 200, `decision.allowed=true`},
			{"/v1/acquire", `{"resource":"` + R + `","user":"u"}`, 429, `decision.reason="REASON_LIMIT_EXCEEDED"`},
			{"/v1/peek", `{"resource":"` + R + `","user":"u"}`, 429, `decision.allowed=false`},
			{"/v1/acquire", `{"resource":"` + R + `","user":"v","requestId":"` + b.Key("r1") + `"}`, 409, `code=6`},
			{"/v1/acquire", `{"resource":"` + R + `","user":"u","amount":"3"}`, 400, `code=3`},
			{"/v1/acquire", `{"resource":"nosuch","user":"u"}`, 404, `code=5`},
			{"/v1/acquire", `{"resource":"` + R + `","usr":"u"}`, 400, `code=3`},
			{"/v1/acquire", `not json`, 400, `code=3`},
			{"/v1/acquire-all", `{"parts":[{"resource":"` + R + `","user":"w"},{"resource":"` + R + `","user":"x"}]}`, 200, `allowed=true`},
			{"/v1/acquire-all", `{"parts":[{"resource":"` + R + `","user":"w","amount":"2"},{"resource":"` + R + `","user":"x"}]}`, 429, `allowed=false`},
			{"/v1/fund", `{"resource":"` + M + `","user":"alice","amount":"50","requestId":"` + b.Key("f1") + `"}`, 200, `funds="50"`},
			{"/v1/fund", `{"resource":"` + M + `","user":"nobody","amount":"50"}`, 404, `code=5`},
			{"/v1/pay", `{"resource":"` + M + `","from":"alice","to":"shop","amount":"30","requestId":"` + b.Key("p1") + `"}`, 200, `decision.allowed=true`},
			{"/v1/pay", `{"resource":"` + M + `","from":"alice","to":"shop","amount":"30","requestId":"` + b.Key("p1") + `"}`, 200, `decision.allowed=true`},
			{"/v1/pay", `{"resource":"` + M + `","from":"alice","to":"shop","amount":"30"}`, 402, `decision.reason="REASON_INSUFFICIENT_FUNDS"`},
			{"/v1/funds", `{"resource":"` + M + `","user":"shop"}`, 200, `funds="30"`},
			{"/v1/pay", `{"resource":"` + M + `","from":"alice","to":"shop","amount":"1","requestId":"` + b.Key("p1") + `"}`, 409, `code=6`},
			{"/v1/reset", `{"resource":"` + R + `","user":"u"}`, 200, `holdsEnded=2`},
			{"/v1/history", `{"resource":"` + R + `","user":"u","max":1}`, 200, `admissions.0.end="END_CANCELLED"`},
			{"/v1/audit", `{"resource":"` + R + `","user":"u"}`, 200, `ok=true`},
			{"/v1/audit", `{"resource":"` + R + `","user":"nobody"}`, 404, `code=5`},
		}
		for _, s := range steps {
			got := e.post(s.path, s.body)
			if got.code != s.code {
				t.Fatalf("POST %s %s = %d %s, want %d", s.path, s.body, got.code, got.body, s.code)
			}
			if got.code == 429 && (got.retry == "" || got.retry == "0") {
				t.Errorf("POST %s %s = 429 with Retry-After %q, want whole seconds", s.path, s.body, got.retry)
			}
			k, want, _ := strings.Cut(s.check, "=")
			if v, _ := json.Marshal(field(t, got.body, k)); string(v) != want {
				t.Fatalf("POST %s %s: %s = %s, want %s (body %s)", s.path, s.body, k, v, want, got.body)
			}
		}
		if funds, err := e.c.Funds(ctx(t), money.Currency, "shop"); err != nil || funds != 30 {
			t.Fatalf("shop holds %d, %v; want 30: the payment sent twice was made once", funds, err)
		}

		// A reservation over HTTP, committed for less.
		got := e.post("/v1/reserve", `{"resource":"`+R+`","user":"z","amount":"2"}`)
		id, _ := field(t, got.body, "reservationId").(string)
		if got.code != 200 || id == "" {
			t.Fatalf("POST /v1/reserve = %d %s, want 200 and a reservation", got.code, got.body)
		}
		if got := e.post("/v1/commit", fmt.Sprintf(`{"reservationId":%q,"amount":"1"}`, id)); got.code != 200 {
			t.Fatalf("POST /v1/commit = %d %s, want 200", got.code, got.body)
		}
		if got := e.post("/v1/commit", fmt.Sprintf(`{"reservationId":%q,"amount":"2"}`, id)); got.code != 409 {
			t.Fatalf("POST /v1/commit of another amount = %d %s, want 409", got.code, got.body)
		}
		if got := e.post("/v1/peek", `{"resource":"`+R+`","user":"z"}`); got.code != 200 || field(t, got.body, "decision.limit") != "2" || field(t, got.body, "decision.remaining") != "1" {
			t.Fatalf("POST /v1/peek after committing 1 of 2 = %d %s, want 200, limit 2, 1 remaining", got.code, got.body)
		}
		got = e.post("/v1/reserve", `{"resource":"`+R+`","user":"y"}`)
		id, _ = field(t, got.body, "reservationId").(string)
		if got := e.post("/v1/cancel", fmt.Sprintf(`{"reservationId":%q}`, id)); got.code != 200 {
			t.Fatalf("POST /v1/cancel = %d %s, want 200", got.code, got.body)
		}
		if got := e.post("/v1/cancel", `{"reservationId":"`+ledger.NewID().String()+`"}`); got.code != 404 {
			t.Fatalf("POST /v1/cancel of an unknown reservation = %d %s, want 404", got.code, got.body)
		}
	})
}

// An unanswered cluster is 503 with Retry-After.
func TestHTTPUnavailable(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := serve(t, b, stalled(t, b))
		got := e.post("/v1/acquire", `{"resource":"api","user":"u"}`)
		if got.code != http.StatusServiceUnavailable || got.retry != "1" {
			t.Fatalf("POST /v1/acquire with the cluster not answering = %d (Retry-After %q) %s, want 503, 1", got.code, got.retry, got.body)
		}
	})
}
