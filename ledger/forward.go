package ledger

import (
	"context"

	"github.com/tblimit/tblimit/ledger/internal/conn"
)

// Forwarding lets a process that holds the cluster (tblimit serve, on the
// embedded engine's data file that one process may hold) be the cluster
// of other Clients (the tblimit CLI's --server): a Client made with
// NewForwarded sends each TigerBeetle operation to a Forwarder, which
// carries it to the holder's Client.Forward. Every call of the forwarded
// Client works as on a cluster of its own, IDs and exactly-once included:
// the holder only applies operations.

// Operation is a TigerBeetle operation carried by a Forwarder. Its events
// and results are tigerbeetle-go's fixed-size types, encoded one after
// another, little endian.
type Operation = conn.Operation

// The operations, one per method of TigerBeetle's client.
const (
	OpCreateAccounts      = conn.OpCreateAccounts
	OpCreateTransfers     = conn.OpCreateTransfers
	OpLookupAccounts      = conn.OpLookupAccounts
	OpLookupTransfers     = conn.OpLookupTransfers
	OpGetAccountTransfers = conn.OpGetAccountTransfers
	OpGetAccountBalances  = conn.OpGetAccountBalances
	OpQueryAccounts       = conn.OpQueryAccounts
	OpQueryTransfers      = conn.OpQueryTransfers
	OpGetChangeEvents     = conn.OpGetChangeEvents
	OpNop                 = conn.OpNop
)

// ErrMalformed means a forwarded operation's events are not whole events
// of the operation, or the operation is unknown.
var ErrMalformed = conn.ErrMalformed

// A Forwarder carries one operation, encoded, to a Client.Forward and
// returns its results. An error wrapping ErrTooMany says the request was
// larger than the cluster takes (the Client sends it again smaller); one
// wrapping ErrUnavailable that it may not have been applied.
type Forwarder func(ctx context.Context, op Operation, events []byte) ([]byte, error)

// NewForwarded returns a Client whose cluster is reached through forward.
func NewForwarded(forward Forwarder, opts ...Option) *Client {
	return New(conn.Forwarded(forward), opts...)
}

// Forward applies one operation, encoded, to c's cluster, within ctx's
// deadline and c's timeout as every call, and returns its results encoded.
// Whoever may call it may do anything with the cluster that a holder of
// its data file could: serve it to operators only.
func (c *Client) Forward(ctx context.Context, op Operation, events []byte) ([]byte, error) {
	return c.conn.Forward(ctx, op, events)
}
