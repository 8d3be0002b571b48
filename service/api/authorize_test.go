package api_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/service"
	"github.com/tblimit/tblimit/service/api"
	"github.com/tblimit/tblimit/testenv"
)

// Reserve on a money resource authorizes a payment to a payee; Commit
// captures it (less than authorized: the rest comes back), Cancel releases
// it; each exactly once under request IDs and retries.
func TestAuthorizeCaptureRelease(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b)
		r := e.resource(ledger.Resource{Kind: ledger.KindMoney, Window: 24 * time.Hour, DefaultLimit: 1000})
		if err := e.c.Provision(ctx(t), r, ledger.UserLimit{Key: "alice", Limit: 1000}, ledger.UserLimit{Key: "shop"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.cl.Fund(ctx(t), &tblimitv1.FundRequest{Resource: r.Name, User: "alice", Amount: 800}); err != nil {
			t.Fatal(err)
		}
		funds := func(alice, shop uint64) {
			t.Helper()
			for user, want := range map[string]uint64{"alice": alice, "shop": shop} {
				if got, err := e.cl.Funds(ctx(t), &tblimitv1.FundsRequest{Resource: r.Name, User: user}); err != nil || got.GetFunds() != want {
					t.Fatalf("Funds(%s) = %v, %v; want %d", user, got, err, want)
				}
			}
		}
		auth := &tblimitv1.ReserveRequest{Resource: r.Name, User: "alice", Payee: "shop", Amount: 500, RequestId: b.Key("auth-1")}
		var ids []string
		for range 2 {
			resp, err := e.cl.Reserve(ctx(t), auth)
			if err != nil || !resp.GetDecision().GetAllowed() || resp.GetReservationId() == "" {
				t.Fatalf("Reserve(500 to shop) = %v, %v; want authorized", resp, err)
			}
			ids = append(ids, resp.GetReservationId())
		}
		if ids[0] != ids[1] {
			t.Fatalf("an authorization sent twice under one request_id: %v, want one", ids)
		}
		funds(300, 0)
		_, err := e.cl.Commit(ctx(t), &tblimitv1.CommitRequest{ReservationId: ids[0], Amount: 501})
		code(t, "capture of more than authorized", err, codes.InvalidArgument)
		for range 2 {
			if _, err := e.cl.Commit(ctx(t), &tblimitv1.CommitRequest{ReservationId: ids[0], Amount: 350}); err != nil {
				t.Fatalf("capture 350 = %v", err)
			}
		}
		funds(450, 350)
		if p := e.peek(r.Name, "alice", 1); p.GetLimit() != 1000 || p.GetRemaining() != 650 {
			t.Fatalf("Peek after capturing 350 = %v, want 650 of 1000 left for the window", p)
		}
		_, err = e.cl.Cancel(ctx(t), &tblimitv1.CancelRequest{ReservationId: ids[0]})
		code(t, "release after capture", err, codes.FailedPrecondition)

		resp, err := e.cl.Reserve(ctx(t), &tblimitv1.ReserveRequest{Resource: r.Name, User: "alice", Payee: "shop", Amount: 400, Timeout: durationpb.New(time.Hour)})
		if err != nil || !resp.GetDecision().GetAllowed() {
			t.Fatalf("Reserve(400) = %v, %v", resp, err)
		}
		funds(50, 350)
		for range 2 {
			if _, err := e.cl.Cancel(ctx(t), &tblimitv1.CancelRequest{ReservationId: resp.GetReservationId()}); err != nil {
				t.Fatalf("release = %v", err)
			}
		}
		funds(450, 350)
		_, err = e.cl.Commit(ctx(t), &tblimitv1.CommitRequest{ReservationId: resp.GetReservationId()})
		code(t, "capture after release", err, codes.FailedPrecondition)

		_, err = e.cl.Reserve(ctx(t), &tblimitv1.ReserveRequest{Resource: r.Name, User: "alice", Amount: 10})
		code(t, "Reserve on money without a payee", err, codes.InvalidArgument)
		_, err = e.cl.Reserve(ctx(t), &tblimitv1.ReserveRequest{Resource: r.Name, User: "alice", Payee: "shop", Amount: 10, Timeout: durationpb.New(48 * time.Hour)})
		code(t, "an authorization past its window", err, codes.InvalidArgument)
		_, err = e.cl.Reserve(ctx(t), &tblimitv1.ReserveRequest{Resource: r.Name, User: "alice", Payee: "nobody", Amount: 10})
		code(t, "an authorization to an unknown payee", err, codes.NotFound)
		rate := e.resource(ledger.Resource{Window: time.Minute, DefaultLimit: 3, Lazy: true})
		_, err = e.cl.Reserve(ctx(t), &tblimitv1.ReserveRequest{Resource: rate.Name, User: "alice", Payee: "shop", Amount: 1})
		code(t, "a payee on a rate resource", err, codes.InvalidArgument)
		_, err = e.cl.Commit(ctx(t), &tblimitv1.CommitRequest{ReservationId: ledger.NewID().String()})
		code(t, "Commit of an unknown reservation", err, codes.NotFound)
		funds(450, 350)
	})
}

// History shows what a commit kept beside what was reserved; Audit counts
// the kept units once, in the window they were reserved in.
func TestHistoryOfACommit(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b)
		r := e.resource(ledger.Resource{Window: time.Hour, DefaultLimit: 10, Lazy: true})
		for _, n := range []uint64{3, 5} {
			resp, err := e.cl.Reserve(ctx(t), &tblimitv1.ReserveRequest{Resource: r.Name, User: "u", Amount: 5})
			if err != nil || !resp.GetDecision().GetAllowed() {
				t.Fatalf("Reserve(5) = %v, %v", resp, err)
			}
			if _, err := e.cl.Commit(ctx(t), &tblimitv1.CommitRequest{ReservationId: resp.GetReservationId(), Amount: n}); err != nil {
				t.Fatalf("Commit(%d) = %v", n, err)
			}
		}
		h, err := e.cl.History(ctx(t), &tblimitv1.HistoryRequest{Resource: r.Name, User: "u"})
		if err != nil || len(h.GetAdmissions()) != 2 {
			t.Fatalf("History = %v, %v; want 2 admissions", h, err)
		}
		for i, want := range []uint64{5, 3} {
			a := h.GetAdmissions()[i]
			if a.GetAmount() != 5 || a.GetEnd() != tblimitv1.End_END_COMMITTED || a.GetKept().GetAmount() != want || a.GetKept().GetEnd() != tblimitv1.End_END_IN_FLIGHT {
				t.Fatalf("History[%d] = %v, want 5 reserved, committed, %d kept in flight", i, a, want)
			}
		}
		a, err := e.cl.Audit(ctx(t), &tblimitv1.AuditRequest{Resource: r.Name, User: "u"})
		if err != nil || !a.GetOk() || a.GetMostInWindow() != 8 || a.GetMostInFlight() != 8 {
			t.Fatalf("Audit = %v, %v; want OK, 8 in the window and in flight", a, err)
		}
	})
}

// ReserveAll holds an LLM call's limits at once, all or none; each part is
// then committed on its own, to what the call used.
func TestReserveAll(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b)
		tpm := e.resource(ledger.Resource{Window: time.Minute, DefaultLimit: 10000, Lazy: true})
		rpm := e.resource(ledger.Resource{Window: time.Minute, DefaultLimit: 2, Lazy: true})
		call := func(max uint64, id string) *tblimitv1.ReserveAllResponse {
			t.Helper()
			resp, err := e.cl.ReserveAll(ctx(t), &tblimitv1.ReserveAllRequest{RequestId: id, Parts: []*tblimitv1.Part{
				{Resource: tpm.Name, User: "alice/gpt", Amount: max}, {Resource: rpm.Name, User: "alice/gpt", Amount: 1},
			}})
			if err != nil {
				t.Fatalf("ReserveAll(%d) = %v", max, err)
			}
			return resp
		}
		r := call(4000, b.Key("call-1"))
		if !r.GetAllowed() || len(r.GetReservationIds()) != 2 {
			t.Fatalf("ReserveAll(4000) = %v, want two reservations", r)
		}
		if again := call(4000, b.Key("call-1")); again.GetReservationIds()[0] != r.GetReservationIds()[0] {
			t.Fatalf("ReserveAll sent again under its request_id = %v, want the same reservations %v", again, r.GetReservationIds())
		}
		for i, n := range []uint64{1300, 0} {
			if _, err := e.cl.Commit(ctx(t), &tblimitv1.CommitRequest{ReservationId: r.GetReservationIds()[i], Amount: n}); err != nil {
				t.Fatalf("Commit(part %d, %d) = %v", i, n, err)
			}
		}
		if p := e.peek(tpm.Name, "alice/gpt", 1); p.GetRemaining() != 8700 {
			t.Fatalf("tokens after committing 1300 of 4000: %v, want 8700 left", p)
		}
		call(100, "")
		denied := call(100, "")
		if denied.GetAllowed() || len(denied.GetReservationIds()) != 0 || denied.GetDecisions()[1].GetReason() != tblimitv1.Reason_REASON_LIMIT_EXCEEDED {
			t.Fatalf("a third call in a minute of 2 = %v, want denied by the requests, no reservation", denied)
		}
		money := e.resource(ledger.Resource{Kind: ledger.KindMoney, Window: time.Hour, DefaultLimit: 100})
		_, err := e.cl.ReserveAll(ctx(t), &tblimitv1.ReserveAllRequest{Parts: []*tblimitv1.Part{{Resource: money.Name, User: "alice", Amount: 5}}})
		code(t, "ReserveAll of a money resource", err, codes.InvalidArgument)
	})
}

// Calls share the server's in-flight bound with Envoy's protocol: past it,
// one fails at once with RESOURCE_EXHAUSTED.
func TestCallsWithinTheBound(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		bound, err := service.NewBound(1)
		if err != nil {
			t.Fatal(err)
		}
		e := start(t, b, api.WithBound(bound))
		r := e.resource(ledger.Resource{Window: time.Minute, DefaultLimit: 5, Lazy: true})
		leave, err := bound.Enter() // another call, of either protocol, deciding
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.cl.Acquire(ctx(t), &tblimitv1.AcquireRequest{Resource: r.Name, User: "u"})
		code(t, "Acquire past the bound", err, codes.ResourceExhausted)
		leave()
		if d := e.acquire(&tblimitv1.AcquireRequest{Resource: r.Name, User: "u"}); !d.GetAllowed() {
			t.Fatalf("Acquire once the bound has room = %v, want allowed", d)
		}
		// Both calls are counted, by method and code.
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(e.svc)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "tblimit_api_calls_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := ""
				for _, l := range m.GetLabel() {
					labels += l.GetName() + "=" + l.GetValue() + " "
				}
				got[labels] = m.GetCounter().GetValue()
			}
		}
		for labels, n := range map[string]float64{"code=OK method=Acquire ": 1, "code=ResourceExhausted method=Acquire ": 1} {
			if got[labels] != n {
				t.Errorf("tblimit_api_calls_total{%s} = %v, want %v (all: %v)", labels, got[labels], n, got)
			}
		}
	})
}
