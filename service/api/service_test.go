package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/simnet"
	"github.com/tblimit/tblimit/service/api"
	"github.com/tblimit/tblimit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is a service on loopback, gRPC and HTTP, for one test.
type env struct {
	t    *testing.T
	b    *testenv.Backend
	c    *ledger.Client
	cl   tblimitv1.LimitServiceClient
	grpc string // address
	http string // base URL
	svc  *api.Service
}

func start(t *testing.T, b *testenv.Backend, opts ...api.Option) *env {
	t.Helper()
	c := ledger.New(b.Client, ledger.WithNow(b.Now))
	return serve(t, b, c, opts...)
}

// serve serves api.New(c, opts...) on loopback until the test ends.
func serve(t *testing.T, b *testenv.Backend, c *ledger.Client, opts ...api.Option) *env {
	t.Helper()
	g := grpc.NewServer()
	mux := http.NewServeMux()
	svc := api.New(c, opts...)
	svc.Register(g, mux)
	reflection.Register(g)
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux}
	go g.Serve(gl)
	go hs.Serve(hl)
	t.Cleanup(func() { g.Stop(); hs.Close() })
	conn, err := grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &env{t: t, b: b, c: c, cl: tblimitv1.NewLimitServiceClient(conn), grpc: gl.Addr().String(), http: "http://" + hl.Addr().String(), svc: svc}
}

// resource creates a resource of the test's own (a name no other test
// meets on a shared server) from r's kind, window, limit and laziness.
func (e *env) resource(r ledger.Resource) ledger.Resource {
	e.t.Helper()
	r.Name = fmt.Sprintf("t%08x", rand.Uint32())
	r.Ledger = e.b.NewLedger()
	if r.Kind == 0 {
		r.Kind = ledger.KindRequests
	}
	if r.Kind == ledger.KindMoney {
		r.Currency = e.b.NewLedger()
	}
	if err := e.c.CreateResource(ctx(e.t), r); err != nil {
		e.t.Fatalf("CreateResource(%v) = %v", r, err)
	}
	return r
}

// ctx is a context for one call: a real server's first call registers a
// session.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// code checks that err is a status of code want.
func code(t *testing.T, call string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("%s = %v, want %s", call, err, want)
	}
}

func (e *env) acquire(req *tblimitv1.AcquireRequest) *tblimitv1.Decision {
	e.t.Helper()
	resp, err := e.cl.Acquire(ctx(e.t), req)
	if err != nil {
		e.t.Fatalf("Acquire(%v) = %v", req, err)
	}
	return resp.GetDecision()
}

func (e *env) peek(res, user string, amount uint64) *tblimitv1.Decision {
	e.t.Helper()
	resp, err := e.cl.Peek(ctx(e.t), &tblimitv1.PeekRequest{Resource: res, User: user, Amount: amount})
	if err != nil {
		e.t.Fatalf("Peek(%s, %s, %d) = %v", res, user, amount, err)
	}
	return resp.GetDecision()
}

// A lazy user counts down to a denial, which is a decision and not an
// error; Peek takes nothing; a request_id retried is one admission.
func TestAcquire(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b)
		r := e.resource(ledger.Resource{Window: time.Minute, DefaultLimit: 3, Lazy: true})
		for want := uint64(2); ; want-- {
			d := e.acquire(&tblimitv1.AcquireRequest{Resource: r.Name, User: "u"})
			if !d.GetAllowed() || d.GetRemaining() != want || d.GetLimit() != 3 || d.GetId() == "" || d.GetReason() != tblimitv1.Reason_REASON_ADMITTED {
				t.Fatalf("Acquire = %v, want allowed, %d remaining of 3", d, want)
			}
			if want == 0 {
				break
			}
		}
		d := e.acquire(&tblimitv1.AcquireRequest{Resource: r.Name, User: "u"})
		if d.GetAllowed() || d.GetReason() != tblimitv1.Reason_REASON_LIMIT_EXCEEDED || d.GetRetryAfter().AsDuration() <= 0 {
			t.Fatalf("4th Acquire = %v, want denied by the limit, with a retry_after", d)
		}
		if p := e.peek(r.Name, "u", 1); p.GetAllowed() || p.GetReason() != tblimitv1.Reason_REASON_LIMIT_EXCEEDED {
			t.Fatalf("Peek of a drained user = %v, want not allowed", p)
		}
		if p := e.peek(r.Name, "v", 2); !p.GetAllowed() || p.GetRemaining() != 3 {
			t.Fatalf("Peek(2) of a new user = %v, want allowed, 3 available", p)
		}

		// One request, however often sent.
		req := &tblimitv1.AcquireRequest{Resource: r.Name, User: "v", Amount: 2, RequestId: b.Key("order-1"), Reference: 42}
		first := e.acquire(req)
		again := e.acquire(req)
		if !first.GetAllowed() || !again.GetAllowed() || first.GetId() != again.GetId() {
			t.Fatalf("Acquire twice under one request_id = %v, %v; want both allowed, one ID", first, again)
		}
		if p := e.peek(r.Name, "v", 1); !p.GetAllowed() || p.GetRemaining() != 1 {
			t.Fatalf("Peek after one request of 2 sent twice = %v, want 1 available", p)
		}
		_, err := e.cl.Acquire(ctx(t), &tblimitv1.AcquireRequest{Resource: r.Name, User: "w", RequestId: b.Key("order-1")})
		code(t, "Acquire for another user under the same request_id", err, codes.AlreadyExists)

		_, err = e.cl.Acquire(ctx(t), &tblimitv1.AcquireRequest{Resource: r.Name, User: "u", Amount: 4})
		code(t, "Acquire(4 of a limit of 3)", err, codes.InvalidArgument)
		_, err = e.cl.Acquire(ctx(t), &tblimitv1.AcquireRequest{Resource: r.Name, User: " u"})
		code(t, "Acquire of a key with a space", err, codes.InvalidArgument)
		_, err = e.cl.Acquire(ctx(t), &tblimitv1.AcquireRequest{Resource: "nosuch", User: "u"})
		code(t, "Acquire on an unknown resource", err, codes.NotFound)
		_, err = e.cl.Acquire(ctx(t), &tblimitv1.AcquireRequest{Resource: fmt.Sprint(r.Ledger), User: "x"})
		code(t, "Acquire by ledger number", err, codes.OK)

		strict := e.resource(ledger.Resource{Window: time.Minute, DefaultLimit: 3})
		_, err = e.cl.Acquire(ctx(t), &tblimitv1.AcquireRequest{Resource: strict.Name, User: "u"})
		code(t, "Acquire of an unknown user on a resource that is not lazy", err, codes.NotFound)
	})
}

// AcquireAll takes every part or none.
func TestAcquireAll(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b)
		sec := e.resource(ledger.Resource{Window: time.Second, DefaultLimit: 5, Lazy: true})
		bytes := e.resource(ledger.Resource{Kind: ledger.KindBytes, Window: time.Minute, DefaultLimit: 1000, Lazy: true})
		all := func(n uint64) *tblimitv1.AcquireAllResponse {
			t.Helper()
			resp, err := e.cl.AcquireAll(ctx(t), &tblimitv1.AcquireAllRequest{Parts: []*tblimitv1.Part{
				{Resource: sec.Name, User: "u"}, {Resource: bytes.Name, User: "u", Amount: n},
			}})
			if err != nil {
				t.Fatalf("AcquireAll = %v", err)
			}
			return resp
		}
		if r := all(600); !r.GetAllowed() || len(r.GetDecisions()) != 2 || r.GetDecisions()[1].GetRemaining() != 400 {
			t.Fatalf("AcquireAll(1 request, 600 bytes) = %v, want allowed, 400 bytes left", r)
		}
		r := all(600)
		if r.GetAllowed() || r.GetDecisions()[1].GetReason() != tblimitv1.Reason_REASON_LIMIT_EXCEEDED ||
			r.GetDecisions()[0].GetAllowed() || r.GetDecisions()[0].GetReason() != tblimitv1.Reason_REASON_UNSPECIFIED {
			t.Fatalf("AcquireAll(1 request, 600 more bytes) = %v, want denied by the bytes; the request part, which fit, not allowed and no reason of its own", r)
		}
		if p := e.peek(sec.Name, "u", 1); p.GetRemaining() != 4 {
			t.Fatalf("requests available after a denied chain: %v, want 4", p)
		}
		_, err := e.cl.AcquireAll(ctx(t), &tblimitv1.AcquireAllRequest{})
		code(t, "AcquireAll of no parts", err, codes.InvalidArgument)
	})
}

// A payment retried under its request_id moves the money once.
func TestPayOnce(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b)
		r := e.resource(ledger.Resource{Kind: ledger.KindMoney, Window: 24 * time.Hour, DefaultLimit: 1000})
		if err := e.c.Provision(ctx(t), r, ledger.UserLimit{Key: "alice", Limit: 1000}, ledger.UserLimit{Key: "shop", Limit: 1000}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			f, err := e.cl.Fund(ctx(t), &tblimitv1.FundRequest{Resource: r.Name, User: "alice", Amount: 500, RequestId: b.Key("top-up")})
			if err != nil || f.GetFunds() != 500 {
				t.Fatalf("Fund #%d = %v, %v; want 500 held", i+1, f, err)
			}
		}
		pay := &tblimitv1.PayRequest{Resource: r.Name, From: "alice", To: "shop", Amount: 200, RequestId: b.Key("order-7")}
		var ids []string
		for i := 0; i < 2; i++ {
			resp, err := e.cl.Pay(ctx(t), pay)
			if err != nil || !resp.GetDecision().GetAllowed() {
				t.Fatalf("Pay #%d = %v, %v; want paid", i+1, resp, err)
			}
			ids = append(ids, resp.GetDecision().GetId())
		}
		if ids[0] != ids[1] {
			t.Fatalf("Pay twice under one request_id: IDs %v, want one", ids)
		}
		for user, want := range map[string]uint64{"alice": 300, "shop": 200} {
			if got, err := e.cl.Funds(ctx(t), &tblimitv1.FundsRequest{Resource: r.Name, User: user}); err != nil || got.GetFunds() != want {
				t.Fatalf("Funds(%s) = %v, %v; want %d: the money moved once", user, got, err, want)
			}
		}
		_, err := e.cl.Funds(ctx(t), &tblimitv1.FundsRequest{Resource: r.Name, User: "nobody"})
		code(t, "Funds of an unknown user", err, codes.NotFound)
		_, err = e.cl.Pay(ctx(t), &tblimitv1.PayRequest{Resource: r.Name, From: "alice", To: "shop", Amount: 300, RequestId: b.Key("order-7")})
		code(t, "Pay of another amount under the same request_id", err, codes.AlreadyExists)

		resp, err := e.cl.Pay(ctx(t), &tblimitv1.PayRequest{Resource: r.Name, From: "alice", To: "shop", Amount: 400})
		if err != nil || resp.GetDecision().GetAllowed() || resp.GetDecision().GetReason() != tblimitv1.Reason_REASON_INSUFFICIENT_FUNDS {
			t.Fatalf("Pay(400 of 300 held) = %v, %v; want denied, insufficient funds", resp, err)
		}
		_, err = e.cl.Pay(ctx(t), &tblimitv1.PayRequest{Resource: r.Name, From: "bob", To: "shop", Amount: 1})
		code(t, "Pay from an unknown user", err, codes.NotFound)
		_, err = e.cl.Pay(ctx(t), &tblimitv1.PayRequest{Resource: r.Name, From: "alice", To: "nobody", Amount: 1})
		code(t, "Pay to an unknown user", err, codes.NotFound)
		_, err = e.cl.Pay(ctx(t), &tblimitv1.PayRequest{Resource: r.Name, From: "alice", To: "shop"})
		code(t, "Pay of 0", err, codes.InvalidArgument)

		rate := e.resource(ledger.Resource{Window: time.Minute, DefaultLimit: 3, Lazy: true})
		_, err = e.cl.Fund(ctx(t), &tblimitv1.FundRequest{Resource: rate.Name, User: "alice", Amount: 1})
		code(t, "Fund of a resource that is not money", err, codes.InvalidArgument)
	})
}

// A reservation committed for less gives the rest back; one cancelled
// gives all of it back.
func TestReserve(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b)
		r := e.resource(ledger.Resource{Window: time.Hour, DefaultLimit: 10, Lazy: true})
		reserve := func(n uint64) string {
			t.Helper()
			resp, err := e.cl.Reserve(ctx(t), &tblimitv1.ReserveRequest{Resource: r.Name, User: "u", Amount: n})
			if err != nil || !resp.GetDecision().GetAllowed() || resp.GetReservationId() == "" {
				t.Fatalf("Reserve(%d) = %v, %v; want reserved", n, resp, err)
			}
			return resp.GetReservationId()
		}
		id := reserve(6)
		if p := e.peek(r.Name, "u", 1); p.GetRemaining() != 4 {
			t.Fatalf("Peek with 6 reserved = %v, want 4 available", p)
		}
		for i := 0; i < 2; i++ {
			if _, err := e.cl.Commit(ctx(t), &tblimitv1.CommitRequest{ReservationId: id, Amount: 2}); err != nil {
				t.Fatalf("Commit(2 of 6) #%d = %v", i+1, err)
			}
		}
		if p := e.peek(r.Name, "u", 1); p.GetLimit() != 10 || p.GetRemaining() != 8 {
			t.Fatalf("Peek after committing 2 of 6 = %v, want limit 10, 8 available (2 kept for the window)", p)
		}
		_, err := e.cl.Commit(ctx(t), &tblimitv1.CommitRequest{ReservationId: id, Amount: 3})
		code(t, "Commit of another amount", err, codes.FailedPrecondition)

		// A reservation sent twice under one request_id is one reservation.
		named := &tblimitv1.ReserveRequest{Resource: r.Name, User: "u", Amount: 5, RequestId: b.Key("job-1")}
		var ids []string
		for range 2 {
			resp, err := e.cl.Reserve(ctx(t), named)
			if err != nil || !resp.GetDecision().GetAllowed() {
				t.Fatalf("Reserve under a request_id = %v, %v; want reserved", resp, err)
			}
			ids = append(ids, resp.GetReservationId())
		}
		if ids[0] != ids[1] {
			t.Fatalf("Reserve twice under one request_id: reservations %v, want one", ids)
		}
		if p := e.peek(r.Name, "u", 1); p.GetRemaining() != 3 {
			t.Fatalf("Peek with 5 reserved (sent twice) = %v, want 3 available", p)
		}
		id = ids[0]
		if _, err := e.cl.Cancel(ctx(t), &tblimitv1.CancelRequest{ReservationId: id}); err != nil {
			t.Fatalf("Cancel = %v", err)
		}
		if p := e.peek(r.Name, "u", 8); !p.GetAllowed() {
			t.Fatalf("Peek(8) after Cancel = %v, want allowed", p)
		}
		_, err = e.cl.Commit(ctx(t), &tblimitv1.CommitRequest{ReservationId: id})
		code(t, "Commit after Cancel", err, codes.FailedPrecondition)
		_, err = e.cl.Cancel(ctx(t), &tblimitv1.CancelRequest{ReservationId: ledger.NewID().String()})
		code(t, "Cancel of an unknown reservation", err, codes.NotFound)
		_, err = e.cl.Commit(ctx(t), &tblimitv1.CommitRequest{ReservationId: "not hex"})
		code(t, "Commit of a malformed reservation_id", err, codes.InvalidArgument)

		reserve(5)
		resp, err := e.cl.Reserve(ctx(t), &tblimitv1.ReserveRequest{Resource: r.Name, User: "u", Amount: 4})
		if err != nil || resp.GetDecision().GetAllowed() || resp.GetReservationId() != "" {
			t.Fatalf("Reserve(4 of 3 left) = %v, %v; want denied, no reservation", resp, err)
		}
		_, err = e.cl.Reserve(ctx(t), &tblimitv1.ReserveRequest{Resource: r.Name, User: "u", Amount: 11})
		code(t, "Reserve(11 of a limit of 10)", err, codes.InvalidArgument)
	})
}

// Reset gives a user's units back; History lists the admissions and how
// they ended; Audit checks them.
func TestResetHistoryAudit(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b)
		r := e.resource(ledger.Resource{Window: time.Hour, DefaultLimit: 5, Lazy: true})
		e.acquire(&tblimitv1.AcquireRequest{Resource: r.Name, User: "u", Amount: 2, Reference: 7})
		e.acquire(&tblimitv1.AcquireRequest{Resource: r.Name, User: "u", Amount: 3, Reference: 8})
		reset, err := e.cl.Reset(ctx(t), &tblimitv1.ResetRequest{Resource: r.Name, User: "u"})
		if err != nil || reset.GetHoldsEnded() != 2 {
			t.Fatalf("Reset = %v, %v; want 2 holds ended", reset, err)
		}
		if p := e.peek(r.Name, "u", 5); !p.GetAllowed() {
			t.Fatalf("Peek(5) after Reset = %v, want allowed", p)
		}
		h, err := e.cl.History(ctx(t), &tblimitv1.HistoryRequest{Resource: r.Name, User: "u"})
		if err != nil || len(h.GetAdmissions()) != 2 {
			t.Fatalf("History = %v, %v; want 2 admissions", h, err)
		}
		if a := h.GetAdmissions()[0]; a.GetAmount() != 3 || a.GetReference() != 8 || a.GetEnd() != tblimitv1.End_END_CANCELLED || a.GetTaken() == nil {
			t.Fatalf("History[0] = %v, want the newest, 3 units, ref 8, cancelled", a)
		}
		a, err := e.cl.Audit(ctx(t), &tblimitv1.AuditRequest{Resource: r.Name, User: "u"})
		if err != nil || !a.GetOk() || a.GetHolds() != 2 || a.GetUnits() != 5 || a.GetEnded() != 2 || a.GetLimit() != 5 {
			t.Fatalf("Audit = %v, %v; want ok, 2 holds, 5 units, 2 ended, limit 5", a, err)
		}
		_, err = e.cl.History(ctx(t), &tblimitv1.HistoryRequest{Resource: r.Name, User: "nobody"})
		code(t, "History of an unknown user", err, codes.NotFound)
		_, err = e.cl.History(ctx(t), &tblimitv1.HistoryRequest{Resource: r.Name, User: "u", Max: 20000})
		code(t, "History of too many", err, codes.InvalidArgument)
	})
}

// A cluster that does not answer is UNAVAILABLE.
func TestUnavailable(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b)
		r := e.resource(ledger.Resource{Window: time.Hour, DefaultLimit: 5, Lazy: true})
		down := serve(t, b, stalled(t, b))
		// The call carries no deadline: the service's Client gives up
		// after its own 100 ms, and the caller waits as long as a loaded
		// machine takes to say so.
		c, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, err := down.cl.Acquire(c, &tblimitv1.AcquireRequest{Resource: r.Name, User: "u"})
		code(t, "Acquire with the cluster not answering", err, codes.Unavailable)
	})
}

// stalled is a ledger.Client of b's cluster that never answers, and gives
// up after 100 ms.
func stalled(t *testing.T, b *testenv.Backend) *ledger.Client {
	sc := simnet.New(b.Client, simnet.RealServer0179, simnet.WithFaults(simnet.Faults{Stall: true}))
	t.Cleanup(sc.Close)
	return ledger.New(sc, ledger.WithTimeout(100*time.Millisecond))
}

// Authorize sees each call's method, permission and resources (Commit's
// twice: before and after the reservation is found), and an HTTP call's
// headers as gRPC metadata.
func TestAuthorize(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		var mu sync.Mutex
		var seen []string
		e := start(t, b, api.Authorize(func(ctx context.Context, c api.Call) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, fmt.Sprintf("%s %s %v %s", c.Method, c.Permission, c.Resources, token(ctx)))
			if c.Permission == api.PermReset && token(ctx) != "Bearer admin" {
				return status.Error(codes.PermissionDenied, "reset needs the admin token")
			}
			return nil
		}))
		r := e.resource(ledger.Resource{Window: time.Hour, DefaultLimit: 5, Lazy: true})
		e.acquire(&tblimitv1.AcquireRequest{Resource: r.Name, User: "u"})
		_, err := e.cl.Reset(ctx(t), &tblimitv1.ResetRequest{Resource: r.Name, User: "u"})
		code(t, "Reset without the token", err, codes.PermissionDenied)
		resp := e.post("/v1/reset", `{"resource":"`+r.Name+`","user":"u"}`, "Authorization", "Bearer admin")
		if resp.code != http.StatusOK {
			t.Fatalf("POST /v1/reset with the token = %d %s, want 200", resp.code, resp.body)
		}
		rv, err := e.cl.Reserve(ctx(t), &tblimitv1.ReserveRequest{Resource: r.Name, User: "u"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.cl.Commit(ctx(t), &tblimitv1.CommitRequest{ReservationId: rv.GetReservationId()}); err != nil {
			t.Fatal(err)
		}
		n := r.Name
		want := []string{"/tblimit.v1.LimitService/Acquire decide [" + n + "] ", "/tblimit.v1.LimitService/Reset reset [" + n + "] ",
			// Over HTTP, the token is checked before the body is read
			// (on no resource), and again on the body's.
			"/tblimit.v1.LimitService/Reset reset [] Bearer admin",
			"/tblimit.v1.LimitService/Reset reset [" + n + "] Bearer admin", "/tblimit.v1.LimitService/Reserve decide [" + n + "] ",
			"/tblimit.v1.LimitService/Commit decide [] ", "/tblimit.v1.LimitService/Commit decide [" + n + "] "}
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Fatalf("Authorize saw %q, want %q", seen, want)
		}
	})
}

// token is the authorization metadata of ctx.
func token(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) > 0 {
		return v[0]
	}
	return ""
}

func TestMethodPermission(t *testing.T) {
	for _, c := range []struct {
		method string
		want   api.Permission
		ok     bool
	}{
		{tblimitv1.LimitService_Acquire_FullMethodName, api.PermDecide, true},
		{tblimitv1.LimitService_Commit_FullMethodName, api.PermDecide, true},
		{tblimitv1.LimitService_Fund_FullMethodName, api.PermFund, true},
		{tblimitv1.LimitService_Reset_FullMethodName, api.PermReset, true},
		{tblimitv1.LimitService_Audit_FullMethodName, api.PermRead, true},
		{tblimitv1.LimitService_Funds_FullMethodName, api.PermRead, true},
		{tblimitv1.LimitService_AddUsers_FullMethodName, api.PermAdmin, true},
		{tblimitv1.LimitService_CreateResource_FullMethodName, api.PermAdmin, true},
		{tblimitv1.LedgerService_Submit_FullMethodName, api.PermAdmin, true},
		{"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", 0, false},
	} {
		if p, ok := api.MethodPermission(c.method); p != c.want || ok != c.ok {
			t.Errorf("MethodPermission(%s) = %s, %v; want %s, %v", c.method, p, ok, c.want, c.ok)
		}
	}
}
