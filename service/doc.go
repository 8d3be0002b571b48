// Package service is what tblimit's network services share: the one table
// from the library's errors to gRPC codes and from those to HTTP statuses.
// The protocols are its siblings: service/ratelimit (Envoy's rate limit
// protocol) and service/api (tblimit.v1). Packages under service may import
// gRPC; ledger and recipes do not.
package service
