package ratelimit

import (
	"context"
	"fmt"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/recipes"
)

// Client asks a rate limit service (tblimit serve, or any server of Envoy's
// RateLimitService) over gRPC, for services that share the service's
// cluster sessions instead of holding one of their own. It is safe for
// concurrent use; most callers want a Limiter.
type Client struct {
	conn *grpc.ClientConn
	rls  rls.RateLimitServiceClient
}

// Dial returns a client of the service at target ("127.0.0.1:8081", or any
// gRPC target). Without options it connects in plain text; pass
// grpc.WithTransportCredentials for TLS. It does no I/O: the connection is
// made by the first call.
func Dial(target string, opts ...grpc.DialOption) (*Client, error) {
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: %s: %w", target, err)
	}
	return &Client{conn: conn, rls: rls.NewRateLimitServiceClient(conn)}, nil
}

// Close closes the client's connection.
func (c *Client) Close() error { return c.conn.Close() }

// Limiter returns a limiter of the descriptor key in domain: its calls
// send one descriptor, (key, the call's key), which the service's
// configuration limits (a rule with that key and no value, or with the
// call's value).
func (c *Client) Limiter(domain, key string) *Limiter {
	return &Limiter{c: c, domain: domain, key: key}
}

// Limiter asks the service for one descriptor per call, with the call
// shape of a recipes.Limiter. It is safe for concurrent use.
type Limiter struct {
	c           *Client
	domain, key string
}

// Allow is shorthand for AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (recipes.Result, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN asks whether key may take n hits now, and takes them if so (0
// checks, taking nothing). A service that does not answer is an error
// wrapping ledger.ErrUnavailable.
func (l *Limiter) AllowN(ctx context.Context, key string, n uint64) (recipes.Result, error) {
	return l.c.decide(ctx, l.domain, 0, []descriptor{{entries: []Entry{{Key: l.key, Value: key}}, hits: &n}})
}

// Decide asks the service to decide descriptors of domain, each a list of
// entries, all taking hits (0 meaning 1), all-or-nothing. The Result has
// a PolicyResult for each descriptor the service limits, in order, named
// by the rule's name or else the descriptor's keys; Key is the
// descriptor's last value.
func (c *Client) Decide(ctx context.Context, domain string, hits uint32, descriptors ...[]Entry) (recipes.Result, error) {
	ds := make([]descriptor, len(descriptors))
	for i, d := range descriptors {
		ds[i].entries = d
	}
	return c.decide(ctx, domain, hits, ds)
}

// descriptor is one descriptor of a request: its entries and, when not
// nil, hits of its own.
type descriptor struct {
	entries []Entry
	hits    *uint64
}

func (c *Client) decide(ctx context.Context, domain string, hits uint32, descriptors []descriptor) (recipes.Result, error) {
	req := &rls.RateLimitRequest{Domain: domain, HitsAddend: hits}
	amounts := make([]uint64, len(descriptors))
	for i, d := range descriptors {
		rd := &rlcommon.RateLimitDescriptor{}
		for _, e := range d.entries {
			rd.Entries = append(rd.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value})
		}
		amounts[i] = uint64(max(hits, 1))
		if d.hits != nil {
			rd.HitsAddend, amounts[i] = wrapperspb.UInt64(*d.hits), *d.hits
		}
		req.Descriptors = append(req.Descriptors, rd)
	}
	resp, err := c.rls.ShouldRateLimit(ctx, req)
	if err != nil {
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded:
			return recipes.NewResult(false, ledger.Unavailable, nil), fmt.Errorf("%w: %w", ledger.ErrUnavailable, err)
		}
		return recipes.Result{}, err
	}
	return resultOf(domain, amounts, descriptors, resp), nil
}

// resultOf reads a service's response as a recipes.Result: a
// PolicyResult for each descriptor the service limits, refused when its
// status is OVER_LIMIT (never to fit when its hits exceed the whole limit).
func resultOf(domain string, amounts []uint64, descriptors []descriptor, resp *rls.RateLimitResponse) recipes.Result {
	allowed, reason := resp.GetOverallCode() != rls.RateLimitResponse_OVER_LIMIT, ledger.Admitted
	if !allowed {
		reason = ledger.LimitExceeded
	}
	var policies []recipes.PolicyResult
	for i, st := range resp.GetStatuses() {
		lim := st.GetCurrentLimit()
		if lim == nil || i >= len(descriptors) {
			continue
		}
		p := recipes.PolicyResult{Limiter: domain, Policy: lim.GetName(), Unit: recipes.Requests,
			Window: TimeUnit(lim.GetUnit()).Window(), Amount: amounts[i]}
		if d := descriptors[i].entries; len(d) > 0 {
			p.Key = d[len(d)-1].Value
			if p.Policy == "" {
				for j, e := range d {
					if j > 0 {
						p.Policy += "."
					}
					p.Policy += e.Key
				}
			}
		}
		p.Decision = ledger.Answered(allowed, st.GetCode() == rls.RateLimitResponse_OVER_LIMIT, amounts[i],
			uint64(lim.GetRequestsPerUnit()), uint64(st.GetLimitRemaining()), st.GetDurationUntilReset().AsDuration())
		policies = append(policies, p)
	}
	return recipes.NewResult(allowed, reason, policies)
}
