package simnet

import (
	"fmt"
	"unsafe"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Op is a TigerBeetle operation, as the client sends it in a request.
type Op uint8

// The operations of tb.Client that make a request. Nop makes none: the
// client answers it by itself.
const (
	CreateAccounts Op = iota
	CreateTransfers
	LookupAccounts
	LookupTransfers
	GetAccountTransfers
	GetAccountBalances
	QueryAccounts
	QueryTransfers
	GetChangeEvents
	opCount
)

var opNames = [opCount]string{
	"create_accounts", "create_transfers", "lookup_accounts", "lookup_transfers",
	"get_account_transfers", "get_account_balances", "query_accounts", "query_transfers",
	"get_change_events",
}

// String returns the operation's name in TigerBeetle, such as "create_transfers".
func (o Op) String() string {
	if o < opCount {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Request sizes, as tb_client 0.17.9 computes them (src/tigerbeetle.zig:
// event_max, result_max, result_count_expected; src/vsr/multi_batch.zig:
// trailer_total_size; src/clients/c/tb_client/packet.zig: batch_validate,
// batch_enqueue).
const (
	// messageBodySizeMax is a message's body: 1 MiB less the 256-byte
	// header. The client never expects a reply larger than this.
	messageBodySizeMax = 1<<20 - 256

	// ProductionBatchSizeLimit is the largest request body a server
	// without --development accepts: 8189 transfers, accounts or IDs
	// to look up (a lookup is bound by its reply: 8189 accounts).
	ProductionBatchSizeLimit = messageBodySizeMax
	// DevelopmentBatchSizeLimit is the largest request body of a server
	// started with --development (32 KiB messages): 253 transfers.
	DevelopmentBatchSizeLimit = 32<<10 - 256

	// batchCountMax is the most batches (calls) one request encodes.
	batchCountMax = 1<<16 - 2
)

// shape is what the client needs to know of an operation to size requests.
type shape struct {
	event, result int  // bytes of one event and of one result
	batchable     bool // takes many events per call (creates, lookups); else one filter
	multiBatch    bool // concurrent calls can share a request
}

var shapes = [opCount]shape{
	CreateAccounts:      {int(unsafe.Sizeof(tb.Account{})), int(unsafe.Sizeof(tb.CreateAccountResult{})), true, true},
	CreateTransfers:     {int(unsafe.Sizeof(tb.Transfer{})), int(unsafe.Sizeof(tb.CreateTransferResult{})), true, true},
	LookupAccounts:      {int(unsafe.Sizeof(tb.Uint128{})), int(unsafe.Sizeof(tb.Account{})), true, true},
	LookupTransfers:     {int(unsafe.Sizeof(tb.Uint128{})), int(unsafe.Sizeof(tb.Transfer{})), true, true},
	GetAccountTransfers: {int(unsafe.Sizeof(tb.AccountFilter{})), int(unsafe.Sizeof(tb.Transfer{})), false, true},
	GetAccountBalances:  {int(unsafe.Sizeof(tb.AccountFilter{})), int(unsafe.Sizeof(tb.AccountBalance{})), false, true},
	QueryAccounts:       {int(unsafe.Sizeof(tb.QueryFilter{})), int(unsafe.Sizeof(tb.Account{})), false, true},
	QueryTransfers:      {int(unsafe.Sizeof(tb.QueryFilter{})), int(unsafe.Sizeof(tb.Transfer{})), false, true},
	GetChangeEvents:     {int(unsafe.Sizeof(tb.ChangeEventsFilter{})), int(unsafe.Sizeof(tb.ChangeEvent{})), false, false},
}

// trailer is the size of a multi-batch trailer: one u16 per batch and one
// for their count, padded to a whole element.
func trailer(element, batches int) int {
	n := 2*batches + 2
	return (n + element - 1) / element * element
}

// eventMax is the most events one call may carry.
func (s shape) eventMax(limit int) int {
	if !s.multiBatch {
		return min(limit/s.event, messageBodySizeMax/s.result)
	}
	return min((limit-trailer(s.event, 1))/s.event, (messageBodySizeMax-trailer(s.result, 1))/s.result)
}

// resultMax is the most results one call may ask for.
func (s shape) resultMax(limit int) int {
	switch {
	case s.batchable:
		return s.eventMax(limit)
	case !s.multiBatch:
		return messageBodySizeMax / s.result
	}
	return (messageBodySizeMax - trailer(s.result, 1)) / s.result
}

// queryResults is how many results the client reserves room for in the
// reply to a query with this limit: the limit, capped at what one reply
// holds (the client caps it rather than refusing).
func (s shape) queryResults(limit uint32) int {
	return int(min(uint64(limit), uint64(s.resultMax(messageBodySizeMax))))
}

// fits reports whether a request of this operation may carry batches calls
// with events events and results results in all.
func (s shape) fits(limit, batches, events, results int) bool {
	if batches > batchCountMax {
		return false
	}
	return events*s.event+trailer(s.event, batches) <= limit &&
		results*s.result+trailer(s.result, batches) <= messageBodySizeMax
}
