// Package ratelimit serves Envoy's rate limit service protocol from tblimit limits kept in TigerBeetle.
//
// A Service answers envoy.service.ratelimit.v3.RateLimitService's
// ShouldRateLimit from a configuration in envoyproxy/ratelimit's YAML
// format (LoadConfig): domains of nested descriptors, each rule a limit of
// requests_per_unit hits per unit. Each rule is a tblimit resource on a
// ledger of its own, whose number derives from the rule (domain, levels,
// unit) and is the same in every service given the same rule; each
// distinct set of descriptor values is a lazy user of it (UserKey).
//
// Unlike envoyproxy/ratelimit, which keeps fixed windows in a cache and by
// default counts every descriptor of a request even when another is over
// its limit, a Service decides the limited descriptors of a request as one
// linked chain of pending transfers: all of them take their hits or none
// does, at most the limit is admitted in any interval of one unit (a
// sliding window), and every admission is a durable, auditable transfer.
//
// Each descriptor's status reports its rule's limit, what is left after
// the decision (LimitRemaining) and, in DurationUntilReset, when the whole
// limit is back (or, for a descriptor over its limit, when the same hits
// fit again). Server serves a Service over gRPC and HTTP; Client and
// Limiter ask one from Go. The command `tblimit serve` runs both.
package ratelimit
