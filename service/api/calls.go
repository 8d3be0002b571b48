package api

import (
	"context"
	"fmt"
	"time"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/service"
)

// The methods of LimitService: each goes through call, which checks its
// permission, bounds its time and turns its error into a gRPC status, to
// one that resolves the resource and calls the ledger.Client. The HTTP
// handlers call these same methods.

// call is the one funnel of every method: it asks Authorize about the
// method on the resources the request names, bounds the
// call so that it ends before the caller's deadline (service.AnswerBefore)
// and within the in-flight bound, if any (WithBound), runs f
// and turns its error into a gRPC status (statusOf).
func call[Req, Resp any](ctx context.Context, s *Service, method string, resources []string, req Req, f func(context.Context, Req) (Resp, error)) (_ Resp, err error) {
	start := time.Now()
	defer func() { s.stats.called(method, start, err) }()
	var none Resp
	if err := s.allow(ctx, method, resources); err != nil {
		return none, statusOf(err)
	}
	if s.bound != nil {
		leave, err := s.bound.Enter()
		if err != nil {
			return none, err
		}
		defer leave()
	}
	ctx, cancel := service.AnswerBefore(ctx)
	defer cancel()
	resp, err := f(ctx, req)
	if err != nil {
		return none, statusOf(err)
	}
	return resp, nil
}

// Acquire takes units of a resource for a user (ledger.Client.Acquire).
func (s *Service) Acquire(ctx context.Context, req *tblimitv1.AcquireRequest) (*tblimitv1.AcquireResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_Acquire_FullMethodName, named(req.GetResource()), req, s.acquire)
}

func (s *Service) acquire(ctx context.Context, req *tblimitv1.AcquireRequest) (*tblimitv1.AcquireResponse, error) {
	r, lreq, err := s.request(ctx, req.GetResource(), req.GetUser(), req.GetAmount(), req.GetRequestId(), req.GetReference())
	if err != nil {
		return nil, err
	}
	d, err := s.c.Acquire(ctx, r, lreq)
	part := ledger.Part{Resource: r, Request: lreq}
	if err == nil {
		err = overLimit(part, d)
	}
	if err != nil {
		return nil, err
	}
	return &tblimitv1.AcquireResponse{Decision: decisionOf(ctx, part, d)}, nil
}

// request resolves a request for units of a resource.
func (s *Service) request(ctx context.Context, resource, user string, amount uint64, rid string, ref uint64) (ledger.Resource, ledger.Request, error) {
	id, err := requestID(rid)
	if err != nil {
		return ledger.Resource{}, ledger.Request{}, err
	}
	r, err := s.resources.get(ctx, resource)
	if err != nil {
		return ledger.Resource{}, ledger.Request{}, err
	}
	return r, ledger.Request{User: user, Amount: units(amount), ID: id, Ref: ref}, nil
}

// AcquireAll takes every part or none (ledger.Client.AcquireAll).
func (s *Service) AcquireAll(ctx context.Context, req *tblimitv1.AcquireAllRequest) (*tblimitv1.AcquireAllResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_AcquireAll_FullMethodName, partsNamed(req.GetParts()), req, s.acquireAll)
}

func (s *Service) acquireAll(ctx context.Context, req *tblimitv1.AcquireAllRequest) (*tblimitv1.AcquireAllResponse, error) {
	parts, err := s.parts(ctx, req.GetParts(), req.GetRequestId(), req.GetReference())
	if err != nil {
		return nil, err
	}
	ds, err := s.c.AcquireAll(ctx, parts)
	if err != nil {
		return nil, err
	}
	out := &tblimitv1.AcquireAllResponse{Allowed: len(ds) > 0 && ds[0].Allowed}
	for i, d := range ds {
		if err := overLimit(parts[i], d); err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		out.Decisions = append(out.Decisions, decisionOf(ctx, parts[i], d))
	}
	return out, nil
}

// parts resolves the parts of a chain; the first part takes the request's
// ID and reference, which name the chain.
func (s *Service) parts(ctx context.Context, in []*tblimitv1.Part, rid string, ref uint64) ([]ledger.Part, error) {
	id, err := requestID(rid)
	if err != nil {
		return nil, err
	}
	if len(in) == 0 || len(in) > ledger.BatchMax {
		return nil, fmt.Errorf("%w: %d parts, want 1 to %d", ledger.ErrTooMany, len(in), ledger.BatchMax)
	}
	parts := make([]ledger.Part, len(in))
	for i, p := range in {
		r, err := s.resources.get(ctx, p.GetResource())
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		parts[i] = ledger.Part{Resource: r, Request: ledger.Request{User: p.GetUser(), Amount: units(p.GetAmount())}}
	}
	parts[0].Request.ID, parts[0].Request.Ref = id, ref
	return parts, nil
}

// ReserveAll reserves every part or none (ledger.Client.ReserveAll).
func (s *Service) ReserveAll(ctx context.Context, req *tblimitv1.ReserveAllRequest) (*tblimitv1.ReserveAllResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_ReserveAll_FullMethodName, partsNamed(req.GetParts()), req, s.reserveAll)
}

func (s *Service) reserveAll(ctx context.Context, req *tblimitv1.ReserveAllRequest) (*tblimitv1.ReserveAllResponse, error) {
	if _, err := s.requiredID(req.GetRequestId()); err != nil {
		return nil, err
	}
	parts, err := s.parts(ctx, req.GetParts(), req.GetRequestId(), req.GetReference())
	if err != nil {
		return nil, err
	}
	for i, p := range parts {
		if p.Resource.Kind == ledger.KindMoney {
			return nil, fmt.Errorf("%w: part %d: %s is a money resource: authorize a payment with Reserve", errInvalid, i, p.Resource.Name)
		}
	}
	rvs, err := s.c.ReserveAll(ctx, parts)
	if err != nil {
		return nil, err
	}
	out := &tblimitv1.ReserveAllResponse{Allowed: rvs[0].OK()}
	for i, rv := range rvs {
		if err := overLimit(parts[i], rv.Decision()); err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		out.Decisions = append(out.Decisions, decisionOf(ctx, parts[i], rv.Decision()))
		if out.Allowed {
			out.ReservationIds = append(out.ReservationIds, rv.Hold().String())
		}
	}
	return out, nil
}

// Peek decides without taking anything (ledger.Client.Check).
func (s *Service) Peek(ctx context.Context, req *tblimitv1.PeekRequest) (*tblimitv1.PeekResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_Peek_FullMethodName, named(req.GetResource()), req, s.peek)
}

func (s *Service) peek(ctx context.Context, req *tblimitv1.PeekRequest) (*tblimitv1.PeekResponse, error) {
	r, lreq, err := s.request(ctx, req.GetResource(), req.GetUser(), req.GetAmount(), "", 0)
	if err != nil {
		return nil, err
	}
	d, err := s.c.Check(ctx, r, lreq)
	part := ledger.Part{Resource: r, Request: lreq}
	if err == nil {
		err = overLimit(part, d)
	}
	if err != nil {
		return nil, err
	}
	return &tblimitv1.PeekResponse{Decision: decisionOf(ctx, part, d)}, nil
}

// Pay pays under a money limit (ledger.Client.Pay).
func (s *Service) Pay(ctx context.Context, req *tblimitv1.PayRequest) (*tblimitv1.PayResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_Pay_FullMethodName, named(req.GetResource()), req, s.pay)
}

func (s *Service) pay(ctx context.Context, req *tblimitv1.PayRequest) (*tblimitv1.PayResponse, error) {
	id, err := s.requiredID(req.GetRequestId())
	if err != nil {
		return nil, err
	}
	r, err := s.money(ctx, req.GetResource())
	if err != nil {
		return nil, err
	}
	p := ledger.Payment{From: req.GetFrom(), To: req.GetTo(), Amount: req.GetAmount(), ID: id, Ref: req.GetReference()}
	d, err := s.c.Pay(ctx, r, p)
	part := ledger.Part{Resource: r, Request: ledger.Request{User: p.From, Amount: p.Amount}}
	if err == nil {
		err = overLimit(part, d)
	}
	if err != nil {
		return nil, err
	}
	out := &tblimitv1.PayResponse{Decision: decisionOf(ctx, part, d)}
	// What the payer holds after it, read once decided so that a caller
	// need not ask. A read that fails leaves it out: the payment is made
	// (or refused) all the same, and an error here would have a caller
	// without a request ID pay again.
	if funds, err := s.c.Funds(ctx, r.Currency, p.From); err == nil {
		out.Funds = &funds
	}
	return out, nil
}

// money resolves a money resource.
func (s *Service) money(ctx context.Context, name string) (ledger.Resource, error) {
	r, err := s.resources.get(ctx, name)
	if err == nil && r.Kind != ledger.KindMoney {
		err = fmt.Errorf("%w: %s is a %s resource, not money", ledger.ErrInvalidResource, r.Name, r.Kind)
	}
	return r, err
}

// Fund credits money to a user on a money resource's currency
// (ledger.Client.Fund), and answers what the user holds then.
func (s *Service) Fund(ctx context.Context, req *tblimitv1.FundRequest) (*tblimitv1.FundResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_Fund_FullMethodName, named(req.GetResource()), req, s.fund)
}

func (s *Service) fund(ctx context.Context, req *tblimitv1.FundRequest) (*tblimitv1.FundResponse, error) {
	id, err := s.requiredID(req.GetRequestId())
	if err != nil {
		return nil, err
	}
	r, err := s.money(ctx, req.GetResource())
	if err != nil {
		return nil, err
	}
	if err := s.c.Fund(ctx, r.Currency, ledger.Request{User: req.GetUser(), Amount: req.GetAmount(), ID: id, Ref: req.GetReference()}); err != nil {
		return nil, err
	}
	out := &tblimitv1.FundResponse{}
	if funds, err := s.c.Funds(ctx, r.Currency, req.GetUser()); err == nil { // as Pay's
		out.Funds = &funds
	}
	return out, nil
}

// Funds reads what a user holds on a money resource's currency
// (ledger.Client.Funds).
func (s *Service) Funds(ctx context.Context, req *tblimitv1.FundsRequest) (*tblimitv1.FundsResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_Funds_FullMethodName, named(req.GetResource()), req, s.funds)
}

func (s *Service) funds(ctx context.Context, req *tblimitv1.FundsRequest) (*tblimitv1.FundsResponse, error) {
	r, err := s.money(ctx, req.GetResource())
	if err != nil {
		return nil, err
	}
	funds, err := s.c.Funds(ctx, r.Currency, req.GetUser())
	if err != nil {
		return nil, err
	}
	return &tblimitv1.FundsResponse{Funds: funds}, nil
}

// Reserve holds units until Commit or Cancel (ledger.Client.Reserve); on a
// money resource it authorizes a payment to req.Payee
// (ledger.Client.Authorize).
func (s *Service) Reserve(ctx context.Context, req *tblimitv1.ReserveRequest) (*tblimitv1.ReserveResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_Reserve_FullMethodName, named(req.GetResource()), req, s.reserve)
}

func (s *Service) reserve(ctx context.Context, req *tblimitv1.ReserveRequest) (*tblimitv1.ReserveResponse, error) {
	if _, err := s.requiredID(req.GetRequestId()); err != nil {
		return nil, err
	}
	r, lreq, err := s.request(ctx, req.GetResource(), req.GetUser(), req.GetAmount(), req.GetRequestId(), req.GetReference())
	if err != nil {
		return nil, err
	}
	var rv *ledger.Reservation
	switch {
	case r.Kind == ledger.KindMoney:
		if req.GetPayee() == "" {
			return nil, fmt.Errorf("%w: payee: a reservation on money resource %s authorizes a payment: name its payee", errInvalid, r.Name)
		}
		var timeout time.Duration
		if t := req.GetTimeout(); t != nil {
			if err := t.CheckValid(); err != nil || t.AsDuration() <= 0 {
				return nil, fmt.Errorf("%w: timeout: a positive duration of whole seconds", errInvalid)
			}
			timeout = t.AsDuration()
		}
		rv, err = s.c.Authorize(ctx, r, ledger.Payment{From: lreq.User, To: req.GetPayee(), Amount: lreq.Amount, ID: lreq.ID, Ref: lreq.Ref, Timeout: timeout})
	case req.GetPayee() != "" || req.GetTimeout() != nil:
		return nil, fmt.Errorf("%w: payee and timeout are for money resources; %s is a %s resource", errInvalid, r.Name, r.Kind)
	default:
		rv, err = s.c.Reserve(ctx, r, lreq)
	}
	part := ledger.Part{Resource: r, Request: lreq}
	if err == nil {
		err = overLimit(part, rv.Decision())
	}
	if err != nil {
		return nil, err
	}
	out := &tblimitv1.ReserveResponse{Decision: decisionOf(ctx, part, rv.Decision())}
	if h := rv.Hold(); !h.IsZero() {
		out.ReservationId = h.String()
	}
	return out, nil
}

// Commit keeps a reservation's units, all or some, until its window ends,
// or captures an authorization (Reservation.Commit, CommitN).
func (s *Service) Commit(ctx context.Context, req *tblimitv1.CommitRequest) (*tblimitv1.CommitResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_Commit_FullMethodName, nil, req, s.commit)
}

func (s *Service) commit(ctx context.Context, req *tblimitv1.CommitRequest) (*tblimitv1.CommitResponse, error) {
	rv, err := s.reservation(ctx, tblimitv1.LimitService_Commit_FullMethodName, req.GetReservationId())
	if err == nil {
		if n := req.GetAmount(); n == 0 {
			err = rv.Commit(ctx)
		} else {
			err = rv.CommitN(ctx, n)
		}
	}
	if err != nil {
		return nil, err
	}
	return &tblimitv1.CommitResponse{}, nil
}

// Cancel gives a reservation's units back (Reservation.Cancel).
func (s *Service) Cancel(ctx context.Context, req *tblimitv1.CancelRequest) (*tblimitv1.CancelResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_Cancel_FullMethodName, nil, req, s.cancel)
}

func (s *Service) cancel(ctx context.Context, req *tblimitv1.CancelRequest) (*tblimitv1.CancelResponse, error) {
	rv, err := s.reservation(ctx, tblimitv1.LimitService_Cancel_FullMethodName, req.GetReservationId())
	if err == nil {
		err = rv.Cancel(ctx)
	}
	if err != nil {
		return nil, err
	}
	return &tblimitv1.CancelResponse{}, nil
}

// reservation finds a reservation by its ID, for method, and asks
// Authorize about method on the reservation's resource: a token that may
// decide on one resource does not end the reservations of another.
func (s *Service) reservation(ctx context.Context, method, id string) (*ledger.Reservation, error) {
	hold, err := ledger.ParseID(id)
	if err != nil {
		return nil, fmt.Errorf("reservation_id: %w", err)
	}
	rv, err := s.c.Reservation(ctx, hold)
	if err != nil {
		return nil, err
	}
	if err := s.allow(ctx, method, []string{rv.Resource().Name}); err != nil {
		return nil, err
	}
	return rv, nil
}

// named is the resources of a request that names one.
func named(resource string) []string { return []string{resource} }

// partsNamed is the resources AcquireAll's parts name, in order.
func partsNamed(parts []*tblimitv1.Part) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = p.GetResource()
	}
	return out
}

// Reset gives back every unit a user holds (ledger.Client.Reset).
func (s *Service) Reset(ctx context.Context, req *tblimitv1.ResetRequest) (*tblimitv1.ResetResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_Reset_FullMethodName, named(req.GetResource()), req, s.reset)
}

func (s *Service) reset(ctx context.Context, req *tblimitv1.ResetRequest) (*tblimitv1.ResetResponse, error) {
	r, err := s.resources.get(ctx, req.GetResource())
	if err != nil {
		return nil, err
	}
	n, err := s.c.Reset(ctx, r, req.GetUser())
	if err != nil {
		return nil, err
	}
	return &tblimitv1.ResetResponse{HoldsEnded: uint32(n)}, nil
}

// History defaults and bounds.
const (
	defaultHistory = 100
	maxHistory     = 10000
)

// History lists a user's admissions (ledger.Client.History).
func (s *Service) History(ctx context.Context, req *tblimitv1.HistoryRequest) (*tblimitv1.HistoryResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_History_FullMethodName, named(req.GetResource()), req, s.history)
}

func (s *Service) history(ctx context.Context, req *tblimitv1.HistoryRequest) (*tblimitv1.HistoryResponse, error) {
	n := int(req.GetMax())
	if n == 0 {
		n = defaultHistory
	}
	if n > maxHistory {
		return nil, fmt.Errorf("%w: max %d, at most %d", errInvalid, n, maxHistory)
	}
	if err := span(req.GetFrom(), req.GetTo()); err != nil {
		return nil, err
	}
	r, err := s.resources.get(ctx, req.GetResource())
	if err != nil {
		return nil, err
	}
	as, err := s.c.History(ctx, r, req.GetUser(), timeOf(req.GetFrom()), timeOf(req.GetTo()), n)
	if err != nil {
		return nil, err
	}
	out := &tblimitv1.HistoryResponse{Admissions: make([]*tblimitv1.Admission, len(as))}
	for i, a := range as {
		out.Admissions[i] = admission(a)
	}
	return out, nil
}

// ends maps the library's ends to the API's.
var ends = map[ledger.End]tblimitv1.End{
	ledger.InFlight:  tblimitv1.End_END_IN_FLIGHT,
	ledger.Expired:   tblimitv1.End_END_EXPIRED,
	ledger.Committed: tblimitv1.End_END_COMMITTED,
	ledger.Cancelled: tblimitv1.End_END_CANCELLED,
}

func admission(a ledger.Admission) *tblimitv1.Admission {
	out := &tblimitv1.Admission{
		Id:        a.ID.String(),
		Hold:      a.Hold.String(),
		Taken:     timestamp(a.Taken),
		Amount:    a.Amount,
		Reference: a.Ref,
		End:       ends[a.End],
		Ended:     timestamp(a.Ended),
	}
	if p := a.Payment; p != nil {
		out.Payment = &tblimitv1.Payment{Id: p.ID.String(), To: p.ToKey, Amount: p.Amount, Time: timestamp(p.Time)}
	}
	if a.Kept != nil {
		out.Kept = admission(*a.Kept)
	}
	return out
}

// Audit checks a user's record against its limit (ledger.Client.Audit).
func (s *Service) Audit(ctx context.Context, req *tblimitv1.AuditRequest) (*tblimitv1.AuditResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_Audit_FullMethodName, named(req.GetResource()), req, s.audit)
}

func (s *Service) audit(ctx context.Context, req *tblimitv1.AuditRequest) (*tblimitv1.AuditResponse, error) {
	if err := span(req.GetFrom(), req.GetTo()); err != nil {
		return nil, err
	}
	r, err := s.resources.get(ctx, req.GetResource())
	if err != nil {
		return nil, err
	}
	a, err := s.c.Audit(ctx, r, req.GetUser(), timeOf(req.GetFrom()), timeOf(req.GetTo()))
	if err != nil {
		return nil, err
	}
	out := &tblimitv1.AuditResponse{
		Ok:           a.OK(),
		Limit:        a.Limit,
		LimitMin:     a.LimitMin,
		LimitMax:     a.LimitMax,
		Holds:        uint64(a.Holds),
		Units:        a.Units,
		Ended:        uint64(a.Ended),
		MostInWindow: a.MostInWindow,
		WindowStart:  timestamp(a.WindowStart),
		MostInFlight: a.MostInFlight,
		InFlightOver: a.InFlightOver,
	}
	for _, t := range a.Over {
		out.Over = append(out.Over, timestamp(t))
	}
	return out, nil
}
