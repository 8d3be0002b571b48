package conn

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Operation names a TigerBeetle operation that Forward carries, encoded:
// its events and results are the tigerbeetle-go types, fixed-size, little
// endian, one after another.
type Operation uint8

// The operations, one per method of tb.Client.
const (
	OpCreateAccounts Operation = iota + 1
	OpCreateTransfers
	OpLookupAccounts
	OpLookupTransfers
	OpGetAccountTransfers
	OpGetAccountBalances
	OpQueryAccounts
	OpQueryTransfers
	OpGetChangeEvents
	OpNop
)

// ErrMalformed means a forwarded request's events are not whole events of
// its operation.
var ErrMalformed = errors.New("ledger: malformed forwarded request")

// Forward applies op to events through the client in use, as every call
// (within ctx's deadline and the Conn's timeout, retried on eviction), and
// returns its results encoded.
func (c *Conn) Forward(ctx context.Context, op Operation, events []byte) ([]byte, error) {
	apply, err := decode(op, events)
	if err != nil {
		return nil, err
	}
	return call(ctx, c, func() ([]byte, error) { return apply(c.tb) })
}

// decode returns the call of op on events, or why events are not that.
func decode(op Operation, events []byte) (func(tb.Client) ([]byte, error), error) {
	switch op {
	case OpCreateAccounts:
		return forwardMany(events, tb.Client.CreateAccounts)
	case OpCreateTransfers:
		return forwardMany(events, tb.Client.CreateTransfers)
	case OpLookupAccounts:
		return forwardMany(events, tb.Client.LookupAccounts)
	case OpLookupTransfers:
		return forwardMany(events, tb.Client.LookupTransfers)
	case OpGetAccountTransfers:
		return forwardOne(events, tb.Client.GetAccountTransfers)
	case OpGetAccountBalances:
		return forwardOne(events, tb.Client.GetAccountBalances)
	case OpQueryAccounts:
		return forwardOne(events, tb.Client.QueryAccounts)
	case OpQueryTransfers:
		return forwardOne(events, tb.Client.QueryTransfers)
	case OpGetChangeEvents:
		return forwardOne(events, tb.Client.GetChangeEvents)
	case OpNop:
		if len(events) != 0 {
			return nil, fmt.Errorf("%w: nop takes no events", ErrMalformed)
		}
		return func(c tb.Client) ([]byte, error) { return nil, c.Nop() }, nil
	}
	return nil, fmt.Errorf("%w: unknown operation %d", ErrMalformed, op)
}

// forwardMany decodes a batch of events for f.
func forwardMany[E, R any](events []byte, f func(tb.Client, []E) ([]R, error)) (func(tb.Client) ([]byte, error), error) {
	in, err := Decode[E](events)
	if err != nil {
		return nil, err
	}
	return func(c tb.Client) ([]byte, error) {
		out, err := f(c, in)
		if err != nil {
			return nil, err
		}
		return Encode(out), nil
	}, nil
}

// forwardOne decodes a query's filter for f.
func forwardOne[E, R any](events []byte, f func(tb.Client, E) ([]R, error)) (func(tb.Client) ([]byte, error), error) {
	in, err := Decode[E](events)
	if err != nil {
		return nil, err
	}
	if len(in) != 1 {
		return nil, fmt.Errorf("%w: %d filters, want 1", ErrMalformed, len(in))
	}
	return func(c tb.Client) ([]byte, error) {
		out, err := f(c, in[0])
		if err != nil {
			return nil, err
		}
		return Encode(out), nil
	}, nil
}

// Encode writes events one after another, fixed-size and little endian.
func Encode[E any](events []E) []byte {
	if len(events) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.Grow(binary.Size(events))
	binary.Write(&b, binary.LittleEndian, events) // fixed-size types: cannot fail
	return b.Bytes()
}

// Decode reads what Encode wrote.
func Decode[E any](data []byte) ([]E, error) {
	var zero E
	size := binary.Size(zero)
	if size <= 0 || len(data)%size != 0 {
		return nil, fmt.Errorf("%w: %d bytes are not whole %T events of %d bytes", ErrMalformed, len(data), zero, size)
	}
	out := make([]E, len(data)/size)
	if err := binary.Read(bytes.NewReader(data), binary.LittleEndian, out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return out, nil
}

// Forwarded is a tb.Client whose every operation is carried by forward
// to a Conn that applies it (Forward): a cluster reached through another
// process. It owns nothing: Close does nothing.
type Forwarded func(ctx context.Context, op Operation, events []byte) ([]byte, error)

func forwarded[E, R any](f Forwarded, op Operation, events []E) ([]R, error) {
	res, err := f(context.Background(), op, Encode(events))
	if err != nil {
		return nil, relayed{err}
	}
	return Decode[R](res)
}

// relayed is an error of a Forwarded operation: the forwarder's, already
// in the caller's terms (ErrUnavailable, ErrTooMany, or what the process
// that applies it said), which the Conn returns as it is rather than as an
// error of TigerBeetle's (see tbError).
type relayed struct{ err error }

func (r relayed) Error() string { return r.err.Error() }
func (r relayed) Unwrap() error { return r.err }

func (f Forwarded) CreateAccounts(as []tb.Account) ([]tb.CreateAccountResult, error) {
	return forwarded[tb.Account, tb.CreateAccountResult](f, OpCreateAccounts, as)
}

func (f Forwarded) CreateTransfers(ts []tb.Transfer) ([]tb.CreateTransferResult, error) {
	return forwarded[tb.Transfer, tb.CreateTransferResult](f, OpCreateTransfers, ts)
}

func (f Forwarded) LookupAccounts(ids []tb.Uint128) ([]tb.Account, error) {
	return forwarded[tb.Uint128, tb.Account](f, OpLookupAccounts, ids)
}

func (f Forwarded) LookupTransfers(ids []tb.Uint128) ([]tb.Transfer, error) {
	return forwarded[tb.Uint128, tb.Transfer](f, OpLookupTransfers, ids)
}

func (f Forwarded) GetAccountTransfers(filter tb.AccountFilter) ([]tb.Transfer, error) {
	return forwarded[tb.AccountFilter, tb.Transfer](f, OpGetAccountTransfers, []tb.AccountFilter{filter})
}

func (f Forwarded) GetAccountBalances(filter tb.AccountFilter) ([]tb.AccountBalance, error) {
	return forwarded[tb.AccountFilter, tb.AccountBalance](f, OpGetAccountBalances, []tb.AccountFilter{filter})
}

func (f Forwarded) QueryAccounts(filter tb.QueryFilter) ([]tb.Account, error) {
	return forwarded[tb.QueryFilter, tb.Account](f, OpQueryAccounts, []tb.QueryFilter{filter})
}

func (f Forwarded) QueryTransfers(filter tb.QueryFilter) ([]tb.Transfer, error) {
	return forwarded[tb.QueryFilter, tb.Transfer](f, OpQueryTransfers, []tb.QueryFilter{filter})
}

func (f Forwarded) GetChangeEvents(filter tb.ChangeEventsFilter) ([]tb.ChangeEvent, error) {
	return forwarded[tb.ChangeEventsFilter, tb.ChangeEvent](f, OpGetChangeEvents, []tb.ChangeEventsFilter{filter})
}

func (f Forwarded) Nop() error {
	if _, err := f(context.Background(), OpNop, nil); err != nil {
		return relayed{err}
	}
	return nil
}

func (f Forwarded) Close() {}
