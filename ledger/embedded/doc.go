// Package embedded is an in-process TigerBeetle: a tb.Client that needs no server.
//
// An *Engine implements the tb.Client interface of
// github.com/tigerbeetle/tigerbeetle-go v0.17.9 with the state machine of a
// TigerBeetle 0.17.9 cluster: CreateAccounts, CreateTransfers (plain,
// pending with timeouts, post and void, balancing, closing, imported events,
// linked chains rolled back as a whole), LookupAccounts, LookupTransfers,
// GetAccountTransfers, GetAccountBalances, QueryAccounts, QueryTransfers,
// Nop and Close. Results, statuses and their precedence, timestamps,
// idempotency (exists, exists_with_different_*, id_already_failed), expiry
// and the 8189-event limit are those of a real cluster; the package's tests
// run the same bodies against a real tigerbeetle binary when one is present.
//
// It does not implement GetChangeEvents, which returns an error wrapping
// ErrUnsupported, and it keeps nothing on disk: the state lives and dies
// with the Engine.
//
// An Engine is safe for concurrent use; requests are applied one at a time,
// like a cluster commits them.
//
// Cluster time comes from a Clock, the system clock by default. Timestamps
// are nanoseconds since the Unix epoch, unique and strictly increasing even
// if the clock goes backwards. A pending transfer expires at exactly
// timestamp + timeout seconds: the first request at or after that instant
// finds its amount released. With a ManualClock (WithClock) tests let time
// pass instantly instead of sleeping.
//
// Memory: a stored transfer costs about 120 bytes (measured with one
// million pending transfers; see TestRetainedBytesPerTransfer), against
// about 440 bytes in a TigerBeetle data file.
//
// Besides serving this module's tests, examples and CLI, the engine is meant
// for users' own tests: anything that takes a tb.Client can be tested with
// New() instead of a cluster.
package embedded
