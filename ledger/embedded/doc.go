// Package embedded is an in-process TigerBeetle: a tb.Client that needs no server.
//
// An *Engine implements the tb.Client interface of
// github.com/tigerbeetle/tigerbeetle-go v0.17.9 with the state machine of a
// TigerBeetle 0.17.9 cluster: CreateAccounts, CreateTransfers (plain,
// pending with timeouts, post and void, balancing, closing, imported events,
// linked chains rolled back as a whole), LookupAccounts, LookupTransfers,
// GetAccountTransfers, GetAccountBalances, QueryAccounts, QueryTransfers,
// GetChangeEvents (transfers and expiries, with both accounts' balances
// after each), Nop and Close. Statuses and their precedence, result
// timestamps, idempotency (exists, exists_with_different_*,
// id_already_failed), expiry, filters and the limit of 8189 events or
// results per request are those of a real cluster: the package's
// conformance tests run the same bodies on the engine and, when a
// tigerbeetle binary is present, on a real server.
//
// New keeps everything in memory; Open keeps it on disk (a *File, also a
// tb.Client): a journal that every acknowledged request survives, even
// kill -9, and a store that holds the state, memory holding an index of
// the account IDs, the pending transfers' expiry and a bounded cache. One
// process at a time may hold it.
//
// An Engine is safe for concurrent use; requests are applied one at a time,
// as a cluster commits them.
//
// Cluster time comes from a Clock, the system clock by default. Timestamps
// are nanoseconds since the Unix epoch, unique and strictly increasing even
// if the clock goes backwards; the events of one request get consecutive
// timestamps. Like TigerBeetle's, they end at 2^63 - 1 (in the year 2262):
// past that, requests fail with ErrClockOutOfRange. A pending transfer
// expires at exactly timestamp + timeout seconds: a request stamped at or
// after that instant finds its amounts released. With a ManualClock
// (WithClock), tests let time pass at once instead of sleeping.
//
// Memory: a stored transfer costs about 105 bytes of heap (measured with a
// million pending transfers by TestRetainedBytesPerTransfer), 16 more if its
// user_data_128 is not zero and 24 more once it has expired (its change
// event), against about 440 bytes in a TigerBeetle data file. Creating one pending transfer per call takes a few hundred
// nanoseconds (BenchmarkCreateTransfersPending); in batches of 64, with a
// million pending transfers stored, a pending transfer and the lookup of
// its account take about 300 to 450 ns together (BenchmarkBatch64).
//
// Besides serving this module's tests, examples and CLI, the engine is meant
// for users' own tests: code that takes a tb.Client can be tested against
// New() instead of a cluster, and a ManualClock makes its timeouts
// instantaneous and deterministic.
package embedded
