package api_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/service"
	"github.com/tblimit/tblimit/service/api"
	"github.com/tblimit/tblimit/testenv"
)

// reason checks that err is a status of code want whose ErrorInfo has
// reason, and that its message is bounded.
func reason(t *testing.T, call string, err error, want codes.Code, reason string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != want {
		t.Fatalf("%s = %v, want %s", call, err, want)
	}
	var got string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			got = info.GetReason()
			if info.GetDomain() != "tblimit.dev" {
				t.Errorf("%s: ErrorInfo domain %q", call, info.GetDomain())
			}
		}
	}
	if got != reason {
		t.Fatalf("%s = %v with reason %q, want %q", call, err, got, reason)
	}
	if len(st.Message()) > 1100 {
		t.Errorf("%s: a message of %d bytes", call, len(st.Message()))
	}
}

// A money resource, a payer and a new payee are provisioned, funded and
// paid over the API alone, with the admin permission; each call repeated
// changes nothing more, and bad input writes nothing.
func TestProvisioning(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		toks, _ := writeTokens(t, `tokens:
  - {name: ops, token: ops-secret, allow: {admin: "*", fund: "*", decide: "*", read: "*"}}
  - {name: shop, token: shop-secret, allow: {decide: "*", admin: [other]}}
`)
		e := start(t, b, api.Authorize(toks.Authorize))
		name := fmt.Sprintf("m%07x", rand.Uint32()>>4)
		res := &tblimitv1.Resource{Name: name, Kind: tblimitv1.Kind_KIND_MONEY, Ledger: b.NewLedger(), Currency: b.NewLedger(),
			Window: durationpb.New(24 * time.Hour), DefaultLimit: 10_000}

		_, err := e.cl.CreateResource(as(t, "shop-secret"), &tblimitv1.CreateResourceRequest{Resource: res})
		reason(t, "CreateResource by a token without admin on *", err, codes.PermissionDenied, "PERMISSION_DENIED")
		_, err = e.cl.CreateResource(as(t, ""), &tblimitv1.CreateResourceRequest{Resource: res})
		reason(t, "CreateResource without a token", err, codes.Unauthenticated, "UNAUTHENTICATED")

		for i, want := range []bool{true, false} {
			got, err := e.cl.CreateResource(as(t, "ops-secret"), &tblimitv1.CreateResourceRequest{Resource: res})
			if err != nil {
				t.Fatalf("CreateResource #%d = %v", i+1, err)
			}
			if got.GetCreated() != want || !proto.Equal(got.GetResource(), res) {
				t.Fatalf("CreateResource #%d = %v, want created %v and %v", i+1, got, want, res)
			}
		}
		// Bad definitions: a clear reason, and nothing written.
		bad := []struct {
			what   string
			change func(r *tblimitv1.Resource)
			code   codes.Code
			reason string
		}{
			{"its ledger with another window", func(r *tblimitv1.Resource) { r.Name, r.Window = "other", durationpb.New(time.Hour) }, codes.FailedPrecondition, "RESOURCE_CONFLICT"},
			{"its name on another ledger", func(r *tblimitv1.Resource) { r.Ledger, r.Currency = b.NewLedger(), b.NewLedger() }, codes.FailedPrecondition, "RESOURCE_CONFLICT"},
			{"a window of 0", func(r *tblimitv1.Resource) { r.Name, r.Ledger, r.Window = "w0", b.NewLedger(), durationpb.New(0) }, codes.InvalidArgument, "INVALID_WINDOW"},
			{"no window", func(r *tblimitv1.Resource) { r.Name, r.Ledger, r.Window = "w0", b.NewLedger(), nil }, codes.InvalidArgument, "INVALID_WINDOW"},
			{"a default limit over 2^63", func(r *tblimitv1.Resource) { r.Name, r.Ledger, r.DefaultLimit = "big", b.NewLedger(), math.MaxUint64 }, codes.InvalidArgument, "INVALID_AMOUNT"},
			{"no kind", func(r *tblimitv1.Resource) { r.Name, r.Ledger, r.Kind = "nokind", b.NewLedger(), 0 }, codes.InvalidArgument, "INVALID_RESOURCE"},
			{"a lazy money resource", func(r *tblimitv1.Resource) { r.Name, r.Ledger, r.Lazy = "lazy", b.NewLedger(), true }, codes.InvalidArgument, "INVALID_RESOURCE"},
			{"a 10 KB name", func(r *tblimitv1.Resource) { r.Name, r.Ledger = strings.Repeat("n", 10_000), b.NewLedger() }, codes.InvalidArgument, "INVALID_RESOURCE"},
		}
		before, err := e.cl.ListResources(as(t, "ops-secret"), &tblimitv1.ListResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range bad {
			r := proto.Clone(res).(*tblimitv1.Resource)
			c.change(r)
			_, err := e.cl.CreateResource(as(t, "ops-secret"), &tblimitv1.CreateResourceRequest{Resource: r})
			reason(t, "CreateResource of "+c.what, err, c.code, c.reason)
		}
		after, err := e.cl.ListResources(as(t, "ops-secret"), &tblimitv1.ListResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(before, after) {
			t.Fatalf("refused definitions changed the resources: %v, then %v", before, after)
		}

		// Users: a payer with a limit of its own, a payee with the default.
		limit := uint64(500)
		users := []*tblimitv1.NewUser{{Key: "payer", Limit: &limit}, {Key: "payee"}}
		for range 2 {
			if _, err := e.cl.AddUsers(as(t, "ops-secret"), &tblimitv1.AddUsersRequest{Resource: name, Users: users}); err != nil {
				t.Fatalf("AddUsers = %v", err)
			}
		}
		big := uint64(math.MaxUint64)
		for _, c := range []struct {
			what   string
			users  []*tblimitv1.NewUser
			reason string
		}{
			{"a 10 KB key", []*tblimitv1.NewUser{{Key: "fine"}, {Key: strings.Repeat("k", 10_000)}}, "INVALID_KEY"},
			{"a limit over 2^63", []*tblimitv1.NewUser{{Key: "fine"}, {Key: "big", Limit: &big}}, "INVALID_AMOUNT"},
			{"a key twice", []*tblimitv1.NewUser{{Key: "fine"}, {Key: "fine"}}, "INVALID_KEY"},
			{"no users", nil, "TOO_MANY"},
		} {
			_, err := e.cl.AddUsers(as(t, "ops-secret"), &tblimitv1.AddUsersRequest{Resource: name, Users: c.users})
			reason(t, "AddUsers with "+c.what, err, codes.InvalidArgument, c.reason)
		}
		_, err = e.cl.GetUser(as(t, "ops-secret"), &tblimitv1.GetUserRequest{Resource: name, User: "fine"})
		reason(t, "GetUser of a user in a refused AddUsers", err, codes.NotFound, "UNKNOWN_USER")

		// Fund, and pay under a request ID, retried: money moves once,
		// and the answer says what the payer holds after it.
		if _, err := e.cl.Fund(as(t, "ops-secret"), &tblimitv1.FundRequest{Resource: name, User: "payer", Amount: 1000, RequestId: "fund-1"}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			p, err := e.cl.Pay(as(t, "shop-secret"), &tblimitv1.PayRequest{Resource: name, From: "payer", To: "payee", Amount: 300, RequestId: "order-1"})
			if err != nil || !p.GetDecision().GetAllowed() || p.GetFunds() != 700 {
				t.Fatalf("Pay = %v, %v; want allowed with 700 left", p, err)
			}
		}
		u, err := e.cl.GetUser(as(t, "ops-secret"), &tblimitv1.GetUserRequest{Resource: name, User: "payee"})
		if err != nil || u.GetUser().GetFunds() != 300 || u.GetUser().GetLimit() != 10_000 {
			t.Fatalf("GetUser(payee) = %v, %v; want funds 300, limit 10000", u, err)
		}

		// Limits: set, then cleared back to the default.
		ten := uint64(10)
		s, err := e.cl.SetLimit(as(t, "ops-secret"), &tblimitv1.SetLimitRequest{Resource: name, User: "payer", Limit: &ten})
		if err != nil || s.GetUser().GetLimit() != 10 {
			t.Fatalf("SetLimit 10 = %v, %v", s, err)
		}
		s, err = e.cl.SetLimit(as(t, "ops-secret"), &tblimitv1.SetLimitRequest{Resource: name, User: "payer"})
		if err != nil || s.GetUser().GetLimit() != 10_000 {
			t.Fatalf("SetLimit with none = %v, %v; want the default 10000", s, err)
		}
		_, err = e.cl.SetLimit(as(t, "ops-secret"), &tblimitv1.SetLimitRequest{Resource: name, User: "payer", Limit: &big})
		reason(t, "SetLimit over 2^63", err, codes.InvalidArgument, "INVALID_AMOUNT")

		l, err := e.cl.ListUsers(as(t, "ops-secret"), &tblimitv1.ListUsersRequest{Resource: name})
		if err != nil || len(l.GetUsers()) != 2 || l.GetUsers()[0].GetKey() != "payer" || l.GetUsers()[1].GetKey() != "payee" {
			t.Fatalf("ListUsers = %v, %v; want payer and payee", l, err)
		}
		_, err = e.cl.ListUsers(as(t, "shop-secret"), &tblimitv1.ListUsersRequest{Resource: name})
		reason(t, "ListUsers with admin on another resource", err, codes.PermissionDenied, "PERMISSION_DENIED")
	})
}

// Every error a caller can cause over tblimit.v1 carries its reason, the
// same over gRPC and over HTTP JSON.
func TestErrorReasons(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, api.RequireRequestID())
		r := e.resource(ledger.Resource{Window: time.Hour, DefaultLimit: 5})
		m := e.resource(ledger.Resource{Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 100})
		if err := e.c.Provision(ctx(t), r, ledger.UserLimit{Key: "u", Limit: 5}); err != nil {
			t.Fatal(err)
		}
		if err := e.c.Provision(ctx(t), m, ledger.UserLimit{Key: "a", Limit: 100}, ledger.UserLimit{Key: "b", Limit: 100}); err != nil {
			t.Fatal(err)
		}
		if err := e.c.Fund(ctx(t), m.Currency, ledger.Request{User: "a", Amount: 50, ID: ledger.KeyID("f")}); err != nil {
			t.Fatal(err)
		}
		rv, err := e.cl.Reserve(ctx(t), &tblimitv1.ReserveRequest{Resource: r.Name, User: "u", RequestId: "rv"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.cl.Cancel(ctx(t), &tblimitv1.CancelRequest{ReservationId: rv.GetReservationId()}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.cl.Pay(ctx(t), &tblimitv1.PayRequest{Resource: m.Name, From: "a", To: "b", Amount: 5, RequestId: "p1"}); err != nil {
			t.Fatal(err)
		}
		// A reservation of a resource of a 1 s window, left to expire.
		short := e.resource(ledger.Resource{Window: time.Second, DefaultLimit: 5, Lazy: true})
		old, err := e.cl.Reserve(ctx(t), &tblimitv1.ReserveRequest{Resource: short.Name, User: "u", RequestId: "old"})
		if err != nil {
			t.Fatal(err)
		}
		b.Advance(t, 2*time.Second)
		taken := &tblimitv1.Resource{Name: r.Name, Kind: tblimitv1.Kind_KIND_REQUESTS, Ledger: b.NewLedger(), Window: durationpb.New(time.Minute)}
		zero := &tblimitv1.Resource{Name: "zero", Kind: tblimitv1.Kind_KIND_REQUESTS, Ledger: b.NewLedger(), Window: durationpb.New(0)}
		cases := []struct {
			reason string
			code   codes.Code
			http   int
			path   string
			req    proto.Message
		}{
			{"UNKNOWN_RESOURCE", codes.NotFound, 404, "/v1/acquire", &tblimitv1.AcquireRequest{Resource: strings.Repeat("x", 10_000), User: "u"}},
			{"UNKNOWN_USER", codes.NotFound, 404, "/v1/acquire", &tblimitv1.AcquireRequest{Resource: r.Name, User: "nobody"}},
			{"UNKNOWN_RESERVATION", codes.NotFound, 404, "/v1/commit", &tblimitv1.CommitRequest{ReservationId: strings.Repeat("1", 32)}},
			{"REQUEST_ID_REUSED", codes.AlreadyExists, 409, "/v1/pay", &tblimitv1.PayRequest{Resource: m.Name, From: "a", To: "b", Amount: 6, RequestId: "p1"}},
			{"RESERVATION_EXPIRED", codes.FailedPrecondition, 409, "/v1/commit", &tblimitv1.CommitRequest{ReservationId: old.GetReservationId()}},
			{"RESERVATION_ENDED", codes.FailedPrecondition, 409, "/v1/commit", &tblimitv1.CommitRequest{ReservationId: rv.GetReservationId()}},
			{"RESOURCE_CONFLICT", codes.FailedPrecondition, 409, "/v1/create-resource", &tblimitv1.CreateResourceRequest{Resource: taken}},
			{"LIMIT_EXCEEDED", codes.InvalidArgument, 400, "/v1/acquire", &tblimitv1.AcquireRequest{Resource: r.Name, User: "u", Amount: 6}},
			{"INVALID_KEY", codes.InvalidArgument, 400, "/v1/acquire", &tblimitv1.AcquireRequest{Resource: r.Name, User: " u"}},
			{"INVALID_AMOUNT", codes.InvalidArgument, 400, "/v1/pay", &tblimitv1.PayRequest{Resource: m.Name, From: "a", To: "b", RequestId: "p0"}},
			{"INVALID_ID", codes.InvalidArgument, 400, "/v1/commit", &tblimitv1.CommitRequest{ReservationId: "not-hex"}},
			{"INVALID_RESOURCE", codes.InvalidArgument, 400, "/v1/pay", &tblimitv1.PayRequest{Resource: r.Name, From: "a", To: "b", Amount: 1, RequestId: "p2"}},
			{"INVALID_WINDOW", codes.InvalidArgument, 400, "/v1/create-resource", &tblimitv1.CreateResourceRequest{Resource: zero}},
			{"TOO_MANY", codes.InvalidArgument, 400, "/v1/acquire-all", &tblimitv1.AcquireAllRequest{}},
			{"INVALID_ARGUMENT", codes.InvalidArgument, 400, "/v1/history", &tblimitv1.HistoryRequest{Resource: r.Name, User: "u", Max: 1 << 30}},
			{"REQUEST_ID_REQUIRED", codes.InvalidArgument, 400, "/v1/pay", &tblimitv1.PayRequest{Resource: m.Name, From: "a", To: "b", Amount: 1}},
			{"REQUEST_ID_REQUIRED", codes.InvalidArgument, 400, "/v1/reserve", &tblimitv1.ReserveRequest{Resource: r.Name, User: "u"}},
		}
		for _, c := range cases {
			both(t, e, c.path, c.req, c.code, c.http, c.reason)
		}

		// Refused before anything is decided: no token, a token without
		// the permission, a server with no room, a cluster not answering.
		toks, _ := writeTokens(t, "tokens:\n  - {name: reader, token: r34d, allow: {read: \"*\"}}\n")
		guarded := start(t, b, api.Authorize(toks.Authorize))
		acquire := &tblimitv1.AcquireRequest{Resource: r.Name, User: "u"}
		both(t, guarded, "/v1/acquire", acquire, codes.Unauthenticated, 401, "UNAUTHENTICATED")
		both(t, guarded, "/v1/acquire", acquire, codes.PermissionDenied, 403, "PERMISSION_DENIED", "authorization", "Bearer r34d")
		bound, err := service.NewBound(1)
		if err != nil {
			t.Fatal(err)
		}
		full := start(t, b, api.WithBound(bound))
		leave, err := bound.Enter()
		if err != nil {
			t.Fatal(err)
		}
		both(t, full, "/v1/acquire", acquire, codes.ResourceExhausted, 503, "OVERLOADED")
		leave()
		// As in TestUnavailable, the call carries no deadline: the
		// service's Client gives up after its own 100 ms.
		noDeadline, cancel := context.WithCancel(context.Background())
		defer cancel()
		bothIn(noDeadline, t, serve(t, b, stalled(t, b)), "/v1/acquire", acquire, codes.Unavailable, 503, "UNAVAILABLE")
	})
}

// both calls the method of path with req over gRPC and over HTTP, with
// header name/value pairs, and checks that each fails with code (HTTP
// status httpStatus) and reason, in a bounded answer.
func both(t *testing.T, e *env, path string, req proto.Message, code codes.Code, httpStatus int, want string, header ...string) {
	t.Helper()
	bothIn(ctx(t), t, e, path, req, code, httpStatus, want, header...)
}

// bothIn is both with the gRPC call in c.
func bothIn(c context.Context, t *testing.T, e *env, path string, req proto.Message, code codes.Code, httpStatus int, want string, header ...string) {
	t.Helper()
	if len(header) > 0 {
		c = metadata.AppendToOutgoingContext(c, header...)
	}
	reason(t, "gRPC "+path+" "+want, invoke(c, t, e, path, req), code, want)
	body, _ := protojson.Marshal(req)
	resp := e.post(path, string(body), header...)
	if resp.code != httpStatus || field(t, resp.body, "details.0.reason") != want {
		t.Errorf("POST %s %.200s = %d %s, want %d with reason %s", path, body, resp.code, resp.body, httpStatus, want)
	}
	if len(resp.body) > 1500 {
		t.Errorf("POST %s: an answer of %d bytes", path, len(resp.body))
	}
}

// invoke calls the gRPC method of an HTTP path with req.
func invoke(c context.Context, t *testing.T, e *env, path string, req proto.Message) error {
	var err error
	switch q := req.(type) {
	case *tblimitv1.AcquireRequest:
		_, err = e.cl.Acquire(c, q)
	case *tblimitv1.AcquireAllRequest:
		_, err = e.cl.AcquireAll(c, q)
	case *tblimitv1.PayRequest:
		_, err = e.cl.Pay(c, q)
	case *tblimitv1.CommitRequest:
		_, err = e.cl.Commit(c, q)
	case *tblimitv1.ReserveRequest:
		_, err = e.cl.Reserve(c, q)
	case *tblimitv1.HistoryRequest:
		_, err = e.cl.History(c, q)
	case *tblimitv1.CreateResourceRequest:
		_, err = e.cl.CreateResource(c, q)
	default:
		t.Fatalf("no gRPC call for %s", path)
	}
	return err
}

// HTTP as clients expect: 413 for a body too large, 404 and 405 as JSON
// errors, the token before the body, a backwards span refused, and the
// RateLimit fields on a decision.
func TestHTTPAnswers(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		toks, _ := writeTokens(t, "tokens:\n  - {name: app, token: app-secret, allow: {decide: \"*\", read: \"*\"}}\n")
		e := start(t, b, api.Authorize(toks.Authorize))
		r := e.resource(ledger.Resource{Window: time.Minute, DefaultLimit: 3, Lazy: true})
		auth := []string{"Authorization", "Bearer app-secret"}

		resp := e.post("/v1/acquire", "{not json", "Authorization", "Bearer wrong")
		if resp.code != http.StatusUnauthorized || field(t, resp.body, "details.0.reason") != "UNAUTHENTICATED" {
			t.Errorf("malformed JSON with a wrong token = %d %s, want 401 before the body is read", resp.code, resp.body)
		}
		resp = e.post("/v1/acquire", `{"resource":"`+strings.Repeat("x", 5<<20)+`"}`, auth...)
		if resp.code != http.StatusRequestEntityTooLarge || field(t, resp.body, "details.0.reason") != "REQUEST_TOO_LARGE" {
			t.Errorf("a 5 MiB body = %d %.200s, want 413", resp.code, resp.body)
		}
		resp = e.post("/v1/nosuch", "{}", auth...)
		if resp.code != http.StatusNotFound || field(t, resp.body, "details.0.reason") != "NOT_FOUND" {
			t.Errorf("POST /v1/nosuch = %d %s, want a JSON 404", resp.code, resp.body)
		}
		get, err := http.Get(e.http + "/v1/acquire")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(get.Body)
		get.Body.Close()
		if get.StatusCode != http.StatusMethodNotAllowed || get.Header.Get("Allow") != "POST" || field(t, string(body), "details.0.reason") != "METHOD_NOT_ALLOWED" {
			t.Errorf("GET /v1/acquire = %d, Allow %q, %s; want a JSON 405", get.StatusCode, get.Header.Get("Allow"), body)
		}
		resp = e.post("/v1/history", `{"resource":"`+r.Name+`","user":"u","from":"2026-01-02T00:00:00Z","to":"2026-01-01T00:00:00Z"}`, auth...)
		if resp.code != http.StatusBadRequest || field(t, resp.body, "details.0.reason") != "INVALID_ARGUMENT" {
			t.Errorf("History from after to = %d %s, want 400", resp.code, resp.body)
		}

		want := map[int][2]string{
			1: {`"` + r.Name + `";q=3;w=60`, `"` + r.Name + `";r=2;t=60`},
			4: {`"` + r.Name + `";q=3;w=60`, `"` + r.Name + `";r=0;t=60`},
		}
		for i := 1; i <= 4; i++ {
			req, _ := http.NewRequest(http.MethodPost, e.http+"/v1/acquire", strings.NewReader(`{"resource":"`+r.Name+`","user":"u"}`))
			req.Header.Set("Authorization", "Bearer app-secret")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if w, ok := want[i]; ok {
				if got := [2]string{resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit")}; got != w {
					t.Errorf("acquire #%d: RateLimit-Policy, RateLimit = %q, want %q", i, got, w)
				}
			}
		}
	})
}
