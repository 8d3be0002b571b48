package api

import (
	"context"
	"fmt"
	"math"

	"google.golang.org/protobuf/types/known/durationpb"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
)

// Provisioning, under PermAdmin: what the CLI's resources and users
// commands do, for services in any language and while serve runs. Each
// call sets a state (a resource as defined, users with limits, a limit),
// so a retry after UNAVAILABLE changes nothing more, and each checks every
// input before it writes anything.

// everyResource names the calls that act on the cluster's resources as a
// whole (CreateResource, ListResources): only a token allowed "*" may.
var everyResource = []string{"*"}

// maxLimit is the largest limit the API takes, as the CLI: 2^63-1.
const maxLimit = math.MaxInt64

// maxUsers bounds the users of one AddUsers.
const maxUsers = 100_000

// kinds maps the API's kinds to the library's.
var kinds = map[tblimitv1.Kind]ledger.Kind{
	tblimitv1.Kind_KIND_REQUESTS: ledger.KindRequests,
	tblimitv1.Kind_KIND_BYTES:    ledger.KindBytes,
	tblimitv1.Kind_KIND_MONEY:    ledger.KindMoney,
}

// resourceIn is the library's form of a Resource in a request.
func resourceIn(in *tblimitv1.Resource) (ledger.Resource, error) {
	if in == nil {
		return ledger.Resource{}, fmt.Errorf("%w: resource: required", errInvalid)
	}
	kind, ok := kinds[in.GetKind()]
	if !ok {
		return ledger.Resource{}, fmt.Errorf("%w: kind %v: want KIND_REQUESTS, KIND_BYTES or KIND_MONEY", ledger.ErrInvalidResource, in.GetKind())
	}
	w := in.GetWindow()
	if w == nil {
		return ledger.Resource{}, fmt.Errorf("%w: window: required (whole seconds)", ledger.ErrInvalidWindow)
	}
	if err := w.CheckValid(); err != nil {
		return ledger.Resource{}, fmt.Errorf("%w: window: %v", ledger.ErrInvalidWindow, err)
	}
	if in.GetDefaultLimit() > maxLimit {
		return ledger.Resource{}, fmt.Errorf("%w: default_limit %d is over %d", ledger.ErrInvalidAmount, in.GetDefaultLimit(), uint64(maxLimit))
	}
	r := ledger.Resource{
		Name: in.GetName(), Ledger: in.GetLedger(), Kind: kind, Window: w.AsDuration(),
		DefaultLimit: in.GetDefaultLimit(), Lazy: in.GetLazy(), Currency: in.GetCurrency(),
	}
	return r, r.Validate()
}

// resourceOut is the API's form of a resource.
func resourceOut(r ledger.Resource) *tblimitv1.Resource {
	out := &tblimitv1.Resource{
		Name: r.Name, Ledger: r.Ledger, Window: durationpb.New(r.Window),
		DefaultLimit: r.DefaultLimit, Lazy: r.Lazy, Currency: r.Currency,
	}
	for k, v := range kinds {
		if v == r.Kind {
			out.Kind = k
		}
	}
	return out
}

// CreateResource creates a resource, or finds it as asked
// (ledger.CheckNewResource, ledger.Client.CreateResource).
func (s *Service) CreateResource(ctx context.Context, req *tblimitv1.CreateResourceRequest) (*tblimitv1.CreateResourceResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_CreateResource_FullMethodName, everyResource, req, s.createResource)
}

func (s *Service) createResource(ctx context.Context, req *tblimitv1.CreateResourceRequest) (*tblimitv1.CreateResourceResponse, error) {
	r, err := resourceIn(req.GetResource())
	if err != nil {
		return nil, err
	}
	all, err := s.c.Resources(ctx)
	if err != nil {
		return nil, err
	}
	exists, err := ledger.CheckNewResource(r, all)
	if err != nil {
		return nil, err
	}
	if !exists {
		if err := s.c.CreateResource(ctx, r); err != nil {
			return nil, err
		}
	}
	return &tblimitv1.CreateResourceResponse{Resource: resourceOut(r), Created: !exists}, nil
}

// ListResources lists every resource (ledger.Client.Resources).
func (s *Service) ListResources(ctx context.Context, req *tblimitv1.ListResourcesRequest) (*tblimitv1.ListResourcesResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_ListResources_FullMethodName, everyResource, req, s.listResources)
}

func (s *Service) listResources(ctx context.Context, _ *tblimitv1.ListResourcesRequest) (*tblimitv1.ListResourcesResponse, error) {
	all, err := s.c.Resources(ctx)
	if err != nil {
		return nil, err
	}
	out := &tblimitv1.ListResourcesResponse{Resources: make([]*tblimitv1.Resource, len(all))}
	for i, r := range all {
		out.Resources[i] = resourceOut(r)
	}
	return out, nil
}

// AddUsers adds users with their limits (ledger.Client.Provision).
func (s *Service) AddUsers(ctx context.Context, req *tblimitv1.AddUsersRequest) (*tblimitv1.AddUsersResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_AddUsers_FullMethodName, named(req.GetResource()), req, s.addUsers)
}

func (s *Service) addUsers(ctx context.Context, req *tblimitv1.AddUsersRequest) (*tblimitv1.AddUsersResponse, error) {
	in := req.GetUsers()
	if len(in) == 0 || len(in) > maxUsers {
		return nil, fmt.Errorf("%w: %d users, want 1 to %d", ledger.ErrTooMany, len(in), maxUsers)
	}
	r, err := s.resources.get(ctx, req.GetResource())
	if err != nil {
		return nil, err
	}
	users := make([]ledger.UserLimit, len(in))
	for i, u := range in {
		limit, err := limitOf(u.Limit, r)
		if err != nil {
			return nil, fmt.Errorf("user %d: %w", i, err)
		}
		users[i] = ledger.UserLimit{Key: u.GetKey(), Limit: limit}
	}
	// Provision checks every key before it writes anything.
	if err := s.c.Provision(ctx, r, users...); err != nil {
		return nil, err
	}
	return &tblimitv1.AddUsersResponse{}, nil
}

// limitOf is a request's limit: r's default limit when unset.
func limitOf(limit *uint64, r ledger.Resource) (uint64, error) {
	if limit == nil {
		return r.DefaultLimit, nil
	}
	if *limit > maxLimit {
		return 0, fmt.Errorf("%w: limit %d is over %d", ledger.ErrInvalidAmount, *limit, uint64(maxLimit))
	}
	return *limit, nil
}

// SetLimit changes a user's limit, or gives it the default limit again
// (ledger.Client.SetLimit).
func (s *Service) SetLimit(ctx context.Context, req *tblimitv1.SetLimitRequest) (*tblimitv1.SetLimitResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_SetLimit_FullMethodName, named(req.GetResource()), req, s.setLimit)
}

func (s *Service) setLimit(ctx context.Context, req *tblimitv1.SetLimitRequest) (*tblimitv1.SetLimitResponse, error) {
	r, err := s.resources.get(ctx, req.GetResource())
	if err != nil {
		return nil, err
	}
	limit, err := limitOf(req.Limit, r)
	if err != nil {
		return nil, err
	}
	if err := s.c.SetLimit(ctx, r, req.GetUser(), limit); err != nil {
		return nil, err
	}
	u, err := s.user(ctx, r, req.GetUser())
	if err != nil {
		return nil, err
	}
	return &tblimitv1.SetLimitResponse{User: u}, nil
}

// GetUser reads a user's state (ledger.Client.Inspect, Funds).
func (s *Service) GetUser(ctx context.Context, req *tblimitv1.GetUserRequest) (*tblimitv1.GetUserResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_GetUser_FullMethodName, named(req.GetResource()), req, s.getUser)
}

func (s *Service) getUser(ctx context.Context, req *tblimitv1.GetUserRequest) (*tblimitv1.GetUserResponse, error) {
	r, err := s.resources.get(ctx, req.GetResource())
	if err != nil {
		return nil, err
	}
	u, err := s.user(ctx, r, req.GetUser())
	if err != nil {
		return nil, err
	}
	return &tblimitv1.GetUserResponse{User: u}, nil
}

// user reads user key's state on r, its funds too on money.
func (s *Service) user(ctx context.Context, r ledger.Resource, key string) (*tblimitv1.User, error) {
	key, err := ledger.NormalizeKey(key)
	if err != nil {
		return nil, err
	}
	u, err := s.c.Inspect(ctx, r, key)
	if err != nil {
		return nil, err
	}
	out := &tblimitv1.User{Key: key, Limit: u.Limit, InFlight: u.InFlight, Available: u.Available}
	if r.Kind == ledger.KindMoney {
		funds, err := s.c.Funds(ctx, r.Currency, key)
		if err != nil {
			return nil, err
		}
		out.Funds = &funds
	}
	return out, nil
}

// ListUsers lists a resource's users (ledger.Client.Users).
func (s *Service) ListUsers(ctx context.Context, req *tblimitv1.ListUsersRequest) (*tblimitv1.ListUsersResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_ListUsers_FullMethodName, named(req.GetResource()), req, s.listUsers)
}

func (s *Service) listUsers(ctx context.Context, req *tblimitv1.ListUsersRequest) (*tblimitv1.ListUsersResponse, error) {
	r, err := s.resources.get(ctx, req.GetResource())
	if err != nil {
		return nil, err
	}
	us, err := s.c.Users(ctx, r)
	if err != nil {
		return nil, err
	}
	out := &tblimitv1.ListUsersResponse{Users: make([]*tblimitv1.User, len(us))}
	for i, u := range us {
		out.Users[i] = &tblimitv1.User{Key: u.Key, Limit: u.Limit, InFlight: u.InFlight, Available: u.Available}
	}
	return out, nil
}

// MigrateUser moves a user to another resource (ledger.Client.Migrate).
func (s *Service) MigrateUser(ctx context.Context, req *tblimitv1.MigrateUserRequest) (*tblimitv1.MigrateUserResponse, error) {
	return call(ctx, s, tblimitv1.LimitService_MigrateUser_FullMethodName, []string{req.GetFrom(), req.GetTo()}, req, s.migrateUser)
}

func (s *Service) migrateUser(ctx context.Context, req *tblimitv1.MigrateUserRequest) (*tblimitv1.MigrateUserResponse, error) {
	from, err := s.resources.get(ctx, req.GetFrom())
	if err != nil {
		return nil, err
	}
	to, err := s.resources.get(ctx, req.GetTo())
	if err != nil {
		return nil, err
	}
	limit, err := limitOf(req.Limit, to)
	if err != nil {
		return nil, err
	}
	m, err := s.c.Migrate(ctx, from, to, req.GetUser(), limit)
	if err != nil {
		return nil, err
	}
	return &tblimitv1.MigrateUserResponse{Limit: m.Limit, Carried: uint32(m.Carried), CarriedUnits: m.CarriedUnits}, nil
}
