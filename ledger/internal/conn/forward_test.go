package conn

import (
	"context"
	"errors"
	"fmt"
	"testing"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Every operation's events and results come back from an encoding as they
// went in.
func TestForwardCodec(t *testing.T) {
	id := tb.Uint128{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	roundTrip(t, []tb.Account{{ID: id, CreditsPosted: tb.ToUint128(7), UserData64: 1 << 60, Ledger: 3, Code: 9, Flags: 5, Timestamp: 42}})
	roundTrip(t, []tb.Transfer{{ID: id, Amount: tb.ToUint128(1 << 40), Timeout: 60, Ledger: 1, Code: 2, Flags: 3, PendingID: id}})
	roundTrip(t, []tb.CreateAccountResult{{Timestamp: 9, Status: tb.AccountExists}})
	roundTrip(t, []tb.CreateTransferResult{{Timestamp: 9, Status: tb.TransferExceedsCredits}, {Status: tb.TransferLinkedEventFailed}})
	roundTrip(t, []tb.Uint128{id, tb.ToUint128(1)})
	roundTrip(t, []tb.AccountFilter{{AccountID: id, Limit: 8189, Flags: 3, TimestampMin: 1, TimestampMax: 2}})
	roundTrip(t, []tb.AccountBalance{{DebitsPending: tb.ToUint128(3), Timestamp: 5}})
	roundTrip(t, []tb.QueryFilter{{Ledger: 4, Code: 1, Limit: 10, Flags: 1, UserData32: 6}})
	roundTrip(t, []tb.ChangeEventsFilter{{TimestampMin: 1, Limit: 5}})
	roundTrip(t, []tb.ChangeEvent{{TransferID: id, Ledger: 2, Type: 3, CreditAccountFlags: 1, Timestamp: 77}})
}

func roundTrip[E comparable](t *testing.T, in []E) {
	t.Helper()
	out, err := Decode[E](Encode(in))
	if err != nil || len(out) != len(in) {
		t.Fatalf("Decode(Encode(%v)) = %v, %v", in, out, err)
	}
	for i := range in {
		if in[i] != out[i] {
			t.Fatalf("Decode(Encode(%+v)) = %+v", in[i], out[i])
		}
	}
}

// A forwarded client reaches the client in use through Forward, and bad
// input is refused before anything is applied.
func TestForwarded(t *testing.T) {
	var applied []tb.Transfer
	target := New(fakeClient{create: func(ts []tb.Transfer) []tb.CreateTransferResult {
		applied = append(applied, ts...)
		return []tb.CreateTransferResult{{Status: tb.TransferCreated}}
	}})
	f := Forwarded(target.Forward)
	res, err := f.CreateTransfers([]tb.Transfer{{ID: tb.ToUint128(5), Amount: tb.ToUint128(1)}})
	if err != nil || len(res) != 1 || res[0].Status != tb.TransferCreated || len(applied) != 1 || applied[0].ID != tb.ToUint128(5) {
		t.Fatalf("CreateTransfers forwarded = %v, %v; applied %v", res, err, applied)
	}
	for _, c := range []struct {
		op     Operation
		events []byte
	}{{OpCreateTransfers, make([]byte, 127)}, {OpQueryAccounts, nil}, {OpNop, []byte{1}}, {Operation(99), nil}} {
		if _, err := target.Forward(context.Background(), c.op, c.events); !errors.Is(err, ErrMalformed) {
			t.Errorf("Forward(%d, %d bytes) = %v, want ErrMalformed", c.op, len(c.events), err)
		}
	}
	if len(applied) != 1 {
		t.Errorf("malformed requests applied: %v", applied)
	}
}

type fakeClient struct {
	tb.Client
	create func([]tb.Transfer) []tb.CreateTransferResult
}

func (f fakeClient) CreateTransfers(ts []tb.Transfer) ([]tb.CreateTransferResult, error) {
	return f.create(ts), nil
}

// An error of the forwarder is returned as it is: it is already in the
// caller's terms, not an error of TigerBeetle's to be wrapped as one.
func TestForwardedErrorIsTheForwarders(t *testing.T) {
	refused := errors.New("tblimit serve at 127.0.0.1:9 refused the call: no token")
	c := New(Forwarded(func(context.Context, Operation, []byte) ([]byte, error) { return nil, refused }))
	_, err := c.CreateTransfers(context.Background(), []tb.Transfer{{ID: tb.ToUint128(5), Amount: tb.ToUint128(1)}})
	if err == nil || err.Error() != refused.Error() || !errors.Is(err, refused) {
		t.Errorf("CreateTransfers through a forwarder that refuses = %v, want %v as it is", err, refused)
	}
	wrapped := fmt.Errorf("%w: tblimit serve at 127.0.0.1:9: connection refused", ErrUnavailable)
	c = New(Forwarded(func(context.Context, Operation, []byte) ([]byte, error) { return nil, wrapped }))
	if _, err := c.LookupAccounts(context.Background(), []tb.Uint128{tb.ToUint128(5)}); !errors.Is(err, ErrUnavailable) || err.Error() != wrapped.Error() {
		t.Errorf("LookupAccounts through an unreachable forwarder = %v, want %v", err, wrapped)
	}
}
