// Package api serves tblimit.v1, tblimit's own API, over gRPC and HTTP JSON.
//
// Each method of tblimit.v1.LimitService is also POST /v1/<method> on HTTP,
// in kebab case (/v1/acquire, /v1/acquire-all, /v1/peek, /v1/pay, /v1/fund,
// /v1/funds, /v1/reserve, /v1/commit, /v1/cancel, /v1/reset, /v1/history, /v1/audit):
// the request and the response in the protobuf JSON mapping; 200, or 429
// with Retry-After for a denial; an error as its google.rpc.Status in JSON
// with the HTTP status of its code (docs/api.md has the table). The Go
// client is the generated one, tblimitv1.NewLimitServiceClient.
package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/service"
)

// Service implements tblimit.v1.LimitService on a ledger.Client: what the
// library gives a Go process, for callers in any language. Resources are
// addressed by name, users by key; the HTTP handlers (Register) call the
// same methods as gRPC does. A Service keeps no state but a cache of the
// cluster's resources (immutable once created): several services on one
// cluster share every limit. It is safe for concurrent use.
type Service struct {
	tblimitv1.UnimplementedLimitServiceServer

	c         *ledger.Client
	resources *resources
	authorize func(ctx context.Context, c Call) error
	bound     *service.Bound // nil: calls are not bounded here
	stats     *stats
	requireID bool // RequireRequestID
}

// Option configures a Service.
type Option func(*Service)

// Call is what Authorize is asked about: a call of a LimitService method.
type Call struct {
	// Method is the full gRPC method name
	// (tblimitv1.LimitService_Acquire_FullMethodName), for HTTP calls too.
	Method string
	// Permission is the method's (MethodPermission).
	Permission Permission
	// Resources are the resources the call acts on, as the request names
	// them (a name, or a ledger number): one, or AcquireAll's parts'.
	// Commit and Cancel name none: they are asked about with none first,
	// and again with the reservation's resource, by name, once it is found.
	Resources []string
}

// Authorize has every call checked by f before it does anything; an
// error f returns is the call's (return a gRPC status, codes.PermissionDenied
// or Unauthenticated, to choose the HTTP status too). An HTTP request's
// headers are in the context's incoming gRPC metadata, keys in lower case
// (metadata.FromIncomingContext), as a gRPC call's are: one f reads a
// bearer token from "authorization" on both. Tokens.Authorize is such an f.
func Authorize(f func(ctx context.Context, c Call) error) Option {
	return func(s *Service) { s.authorize = f }
}

// WithBound bounds the calls deciding at once by b, which Envoy's protocol
// served beside the API shares (tblimit serve --max-waiting): past it, a
// call fails at once with RESOURCE_EXHAUSTED (HTTP 503).
func WithBound(b *service.Bound) Option {
	return func(s *Service) { s.bound = b }
}

// RequireRequestID refuses a Pay, Fund, Reserve or ReserveAll without a
// request_id (INVALID_ARGUMENT, reason REQUEST_ID_REQUIRED): a client
// whose library drops the field by accident (proto-loader without
// keepCase reads requestId, not request_id) is told at once, instead of
// moving money again on a retry.
func RequireRequestID() Option {
	return func(s *Service) { s.requireID = true }
}

// New returns the service of c. It is a prometheus.Collector of the counts
// and times of its calls (tblimit_api_calls_total,
// tblimit_api_call_duration_seconds).
func New(c *ledger.Client, opts ...Option) *Service {
	s := &Service{c: c, resources: newResources(c), stats: newStats()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Register serves s on a gRPC server and, when mux is not nil, its HTTP
// JSON form on mux (see the package documentation); either may be nil.
// The gRPC server also gets tblimit.v1.LedgerService, which carries
// TigerBeetle's operations to s's Client for the CLI's --server (admin
// on "*" only; gRPC only).
func (s *Service) Register(g grpc.ServiceRegistrar, mux *http.ServeMux) {
	if g != nil {
		tblimitv1.RegisterLimitServiceServer(g, s)
		tblimitv1.RegisterLedgerServiceServer(g, ledgerService{s: s})
	}
	if mux != nil {
		s.registerHTTP(mux)
	}
}

// Permission is what a call needs: one of five, so that an operator can
// let a service decide without letting it fund or reset.
type Permission uint8

const (
	// PermDecide: Acquire, AcquireAll, Peek, Pay, Reserve, Commit, Cancel.
	PermDecide Permission = iota + 1
	// PermFund: Fund.
	PermFund
	// PermReset: Reset.
	PermReset
	// PermRead: Funds, History, Audit.
	PermRead
	// PermAdmin: provisioning, CreateResource to MigrateUser (on
	// CreateResource and ListResources, the resources are "*").
	PermAdmin
)

// String returns "decide", "fund", "reset", "read" or "admin".
func (p Permission) String() string {
	switch p {
	case PermDecide:
		return "decide"
	case PermFund:
		return "fund"
	case PermReset:
		return "reset"
	case PermRead:
		return "read"
	case PermAdmin:
		return "admin"
	}
	return fmt.Sprintf("Permission(%d)", uint8(p))
}

// permissions is each method's permission, by full gRPC method name.
var permissions = map[string]Permission{
	tblimitv1.LimitService_Acquire_FullMethodName:    PermDecide,
	tblimitv1.LimitService_AcquireAll_FullMethodName: PermDecide,
	tblimitv1.LimitService_Peek_FullMethodName:       PermDecide,
	tblimitv1.LimitService_Pay_FullMethodName:        PermDecide,
	tblimitv1.LimitService_Reserve_FullMethodName:    PermDecide,
	tblimitv1.LimitService_ReserveAll_FullMethodName: PermDecide,
	tblimitv1.LimitService_Commit_FullMethodName:     PermDecide,
	tblimitv1.LimitService_Cancel_FullMethodName:     PermDecide,
	tblimitv1.LimitService_Fund_FullMethodName:       PermFund,
	tblimitv1.LimitService_Reset_FullMethodName:      PermReset,
	tblimitv1.LimitService_Funds_FullMethodName:      PermRead,
	tblimitv1.LimitService_History_FullMethodName:    PermRead,
	tblimitv1.LimitService_Audit_FullMethodName:      PermRead,

	tblimitv1.LimitService_CreateResource_FullMethodName: PermAdmin,
	tblimitv1.LimitService_ListResources_FullMethodName:  PermAdmin,
	tblimitv1.LimitService_AddUsers_FullMethodName:       PermAdmin,
	tblimitv1.LimitService_SetLimit_FullMethodName:       PermAdmin,
	tblimitv1.LimitService_GetUser_FullMethodName:        PermAdmin,
	tblimitv1.LimitService_ListUsers_FullMethodName:      PermAdmin,
	tblimitv1.LimitService_MigrateUser_FullMethodName:    PermAdmin,
	tblimitv1.LedgerService_Submit_FullMethodName:        PermAdmin,
}

// MethodPermission returns the permission of a LimitService method, by its
// full gRPC name; false for a method that is not LimitService's.
func MethodPermission(fullMethod string) (Permission, bool) {
	p, ok := permissions[fullMethod]
	return p, ok
}

// allow checks the call of method on resources with the Authorize
// function, if any.
func (s *Service) allow(ctx context.Context, method string, resources []string) error {
	if s.authorize == nil {
		return nil
	}
	return s.authorize(ctx, Call{Method: method, Permission: permissions[method], Resources: resources})
}

// requestID is the ledger ID a request_id names: zero for none.
func requestID(s string) (ledger.ID, error) {
	if s == "" {
		return ledger.ID{}, nil
	}
	if len(s) > ledger.MaxKeyLen {
		return ledger.ID{}, fmt.Errorf("%w: request_id of %d bytes, more than %d", ledger.ErrInvalidID, len(s), ledger.MaxKeyLen)
	}
	return ledger.KeyID(s), nil
}

// requiredID is requestID, refusing none when RequireRequestID is set.
func (s *Service) requiredID(rid string) (ledger.ID, error) {
	if rid == "" && s.requireID {
		return ledger.ID{}, fmt.Errorf("%w: this server takes payments, funds and reservations under a request_id only (tblimit serve --require-request-id)", service.ErrRequestIDRequired)
	}
	return requestID(rid)
}

// units is a request's amount: 0 means 1.
func units(n uint64) uint64 { return max(n, 1) }

// timeOf is a request's time: the zero time (no bound) when not set.
func timeOf(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

// span checks a request's from and to: from after to is the caller's
// mistake, not an empty answer.
func span(from, to *timestamppb.Timestamp) error {
	if from != nil && to != nil && from.AsTime().After(to.AsTime()) {
		return fmt.Errorf("%w: from %s is after to %s", errInvalid, from.AsTime().Format(time.RFC3339Nano), to.AsTime().Format(time.RFC3339Nano))
	}
	return nil
}

// timestamp is t in the API, nil for the zero time.
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
