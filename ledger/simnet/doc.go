// Package simnet makes a tb.Client cost what a client of a real TigerBeetle cluster costs.
//
// The embedded engine answers in microseconds; a real cluster answers a
// request after a network round trip and a turn of a single-threaded server,
// and the Go client keeps one request in flight. A Client wraps any
// tb.Client (usually the embedded engine) and reproduces that, for tests and
// benchmarks:
//
//   - One request in flight. A call made while the Client is idle leaves at
//     once, alone. Calls made while a request is in flight wait; those of one
//     operation are merged, in arrival order, into the first waiting request
//     of that operation with room, up to the operation's request size limit
//     (8189 transfers, accounts or IDs to look up; queries by the
//     results their limits ask for, 8189 transfers in all); calls that do not
//     fit start a new request. Requests leave in the order they were started,
//     whatever their operation, the next one as soon as the reply of the one
//     in flight is in, before its callers are answered. Calls of different
//     operations never share a request; get_change_events calls never share
//     one.
//   - Each call's events are applied to the wrapped client on their own, as
//     the server applies each batch of a multi-batch request: a linked chain
//     never spans callers, and each caller gets its own results, with the
//     timestamps the wrapped client gave.
//   - Each request takes the time its Model gives (RoundTrip + per request +
//     per event + occasional stalls + pauses for the compaction its writes
//     owe). The calls are applied when it leaves;
//     its callers are answered when it ends. Ends are absolute deadlines: a
//     request that leaves when the previous one ends starts at that end in
//     model time, however late the process woke up, so timer jitter does not
//     accumulate; if the wrapped client itself took longer, the request ends
//     then, and no later.
//   - A call too large for one request fails with tb.ErrTooMuchData, as in
//     the client.
//   - Faults (stalls, lost requests and replies, duplicates, delays) can be
//     injected for tests, from a seeded generator.
//
// RealServer0179 is calibrated on a real 0.17.9 server (CALIBRATION.md says
// on what, how well, and where it is too kind).
// The model has no server shared between Clients: several Clients on one
// engine do not wait for each other, as several clients of one real
// cluster would. Expiry of pending transfers costs nothing in the model.
//
// The batching rules follow tb_client 0.17.9 (TigerBeetle's
// src/clients/c/tb_client/context.zig and packet.zig, batch_enqueue;
// src/tigerbeetle.zig, event_max and result_count_expected;
// src/vsr/multi_batch.zig).
package simnet
