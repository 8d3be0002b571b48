package simnet

import (
	"math/rand/v2"
	"time"
)

// Model is what requests cost: the time from when a request leaves the
// client until its reply is back. The zero Model costs nothing and keeps
// only the client's structure: one request in flight, concurrent calls
// merged into the next request, the request size limits.
//
// A request of operation op carrying events events (for queries, returning
// results results) takes
//
//	RoundTrip + Ops[op].PerRequest + Ops[op].PerEvent × events (created, looked up, returned)
//	          + Ops[op].PerFailed × events not created (creates only)
//	          + a stall, with probability StallProb, drawn from an
//	            exponential distribution of mean StallMean
//	          + a compaction pause of CompactionPause, when the compaction
//	            owed (CompactionPerEvent per account or transfer created so
//	            far, less the pauses already taken) reaches it.
type Model struct {
	// Name names the model in reports.
	Name string
	// RoundTrip is paid by every request: the network both ways and the
	// client's own hops (its I/O thread, cgo).
	RoundTrip time.Duration
	// Ops are the server's costs, by operation (index with CreateTransfers,
	// LookupAccounts, ...).
	Ops [opCount]Cost
	// StallProb and StallMean model the server's pauses (compaction,
	// checkpoints, fsync): the tail of the latency distribution.
	StallProb float64
	StallMean time.Duration
	// CompactionPerEvent and CompactionPause model the server's work in
	// proportion to what it wrote (LSM compaction): every account or
	// transfer created owes CompactionPerEvent, paid in pauses of
	// CompactionPause by the request during which the debt reaches it
	// (at once, if CompactionPause is 0). Under a heavy write load, most
	// requests are quick and a few wait long, as on a real server.
	CompactionPerEvent time.Duration
	CompactionPause    time.Duration
	// BatchSizeLimit is the largest request body the server accepts, in
	// bytes: 0 means ProductionBatchSizeLimit.
	BatchSizeLimit int
	// Register is added to a Client's first request: a real client
	// registers its session with the cluster before its first call is
	// answered (0.4-0.6 s measured on a 0.17.9 server, with the
	// connection).
	Register time.Duration
}

// Cost is what the server spends on requests of one operation.
type Cost struct {
	// PerRequest is paid once per request, whatever it carries.
	PerRequest time.Duration
	// PerEvent is paid per event: per account or transfer created (for
	// creates), per ID looked up, per result returned (for queries).
	PerEvent time.Duration
	// PerFailed is paid, for creates, per event that was not created (it
	// failed, or already existed) instead of PerEvent.
	PerFailed time.Duration
}

// String returns the model's name.
func (m Model) String() string {
	if m.Name == "" {
		return "simnet.Model"
	}
	return m.Name
}

func (m *Model) batchSizeLimit() int {
	if m.BatchSizeLimit <= 0 {
		return ProductionBatchSizeLimit
	}
	return m.BatchSizeLimit
}

// outcome is what a request did: events created (or looked up, or results
// returned) and events that failed.
type outcome struct{ done, failed int }

func (o outcome) add(p outcome) outcome { return outcome{o.done + p.done, o.failed + p.failed} }

// cost is the time a request of op with outcome o takes; rng draws the
// stall, debt is the compaction owed (updated).
func (m *Model) cost(op Op, o outcome, rng *rand.Rand, debt *time.Duration) time.Duration {
	c := m.Ops[op]
	d := m.RoundTrip + c.PerRequest + time.Duration(o.done)*c.PerEvent + time.Duration(o.failed)*c.PerFailed
	if m.StallProb > 0 && m.StallMean > 0 && rng.Float64() < m.StallProb {
		d += time.Duration(rng.ExpFloat64() * float64(m.StallMean))
	}
	if op == CreateAccounts || op == CreateTransfers {
		*debt += time.Duration(o.done) * m.CompactionPerEvent
	}
	if *debt > 0 && *debt >= m.CompactionPause {
		pause := m.CompactionPause
		if pause <= 0 {
			pause = *debt
		}
		d += pause
		*debt -= pause
	}
	return d
}

// RealServer0179 is a single TigerBeetle 0.17.9 server without
// --development, its client and server sharing one 2-core machine. It
// reproduces the measured decisions/s of one pending transfer per call
// within about 20% (hot user and 100,000 users, 1 to 256 callers, burst and
// sustained) and the latency tail of heavy writes. Reads are charged as
// measured alone; a real server charged tblimit's reads on 100,000 users
// far more, so a design that reads per decision looks better on this model
// than on a server. CALIBRATION.md has the data, the fit and the rest.
var RealServer0179 = Model{
	Name:      "real server 0.17.9 (2 cores, loopback)",
	RoundTrip: 170 * time.Microsecond,
	Ops: [opCount]Cost{
		CreateAccounts:      {PerRequest: 220 * time.Microsecond, PerEvent: 7 * time.Microsecond, PerFailed: 3500 * time.Nanosecond},
		CreateTransfers:     {PerRequest: 220 * time.Microsecond, PerEvent: 7 * time.Microsecond, PerFailed: 3500 * time.Nanosecond},
		LookupAccounts:      {PerRequest: 185 * time.Microsecond, PerEvent: 400 * time.Nanosecond},
		LookupTransfers:     {PerRequest: 185 * time.Microsecond, PerEvent: 400 * time.Nanosecond},
		GetAccountTransfers: {PerRequest: 340 * time.Microsecond, PerEvent: 500 * time.Nanosecond},
		GetAccountBalances:  {PerRequest: 340 * time.Microsecond, PerEvent: 500 * time.Nanosecond},
		QueryAccounts:       {PerRequest: 340 * time.Microsecond, PerEvent: 500 * time.Nanosecond},
		QueryTransfers:      {PerRequest: 340 * time.Microsecond, PerEvent: 500 * time.Nanosecond},
		GetChangeEvents:     {PerRequest: 340 * time.Microsecond, PerEvent: 500 * time.Nanosecond},
	},
	StallProb:          0.10,
	StallMean:          1400 * time.Microsecond,
	CompactionPerEvent: 16 * time.Microsecond,
	CompactionPause:    35 * time.Millisecond,
}
