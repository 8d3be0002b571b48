package ledger

import (
	"errors"
	"fmt"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/internal/conn"
)

func unavailable(err error) error { return conn.Unavailable(err) }

var (
	// ErrUnavailable means the cluster did not answer within the call's
	// deadline, or the client was closed. The call may still be applied
	// later: a hold sent before the deadline can count against the limit
	// afterwards (conservative: it never admits more).
	ErrUnavailable = conn.ErrUnavailable
	// ErrInvalidResource means a Resource definition is not valid.
	ErrInvalidResource = errors.New("ledger: invalid resource")
	// ErrInvalidWindow means a window is not a whole number of seconds
	// between 1 and 2^32-1.
	ErrInvalidWindow = errors.New("ledger: invalid window")
	// ErrInvalidAmount means an amount is zero or too large.
	ErrInvalidAmount = errors.New("ledger: invalid amount")
	// ErrInvalidKey means a user key breaks the key rule (see NormalizeKey).
	ErrInvalidKey = errors.New("ledger: invalid user key")
	// ErrInvalidID means an ID could not be parsed, or is not allowed where
	// it was given.
	ErrInvalidID = errors.New("ledger: invalid ID")
	// ErrIDReused means an ID that names a request (Request.ID,
	// Payment.ID) was given for a different request: another user,
	// amount, resource or kind of call. It wraps ErrInvalidID.
	ErrIDReused = fmt.Errorf("%w: already used for a different request", ErrInvalidID)
	// ErrUnknownResource means no resource exists on the ledger.
	ErrUnknownResource = errors.New("ledger: unknown resource")
	// ErrUnknownUser means the user has no account on the resource's
	// ledger (or currency ledger) and the resource is not lazy.
	ErrUnknownUser = errors.New("ledger: unknown user")
	// ErrResourceMismatch means a resource already exists on the ledger
	// with a different definition.
	ErrResourceMismatch = errors.New("ledger: resource exists with a different definition")
	// ErrTooMany means a batch holds more events than one request can carry.
	ErrTooMany = conn.ErrTooMany
	// ErrInvalidAddress means Dial was given addresses it cannot use: one
	// that is not a port, host:port or address, or more than a cluster has.
	ErrInvalidAddress = errors.New("ledger: invalid cluster address")
	// ErrLimitChanging means Audit found a user's limit changed each time
	// it read it (see Audit): nothing is wrong, try again.
	ErrLimitChanging = errors.New("ledger: limit changing")
)

// UnknownUserError is the error of a decision refused because a user has
// no account on a resource that is not lazy: it says which, so that a
// caller deciding several holds at once (AcquireAll) knows which one.
// errors.Is(err, ErrUnknownUser) holds for it.
type UnknownUserError struct {
	Resource Resource
	User     string
}

func (e *UnknownUserError) Error() string {
	return fmt.Sprintf("%v: %q on %s", ErrUnknownUser, e.User, e.Resource.Name)
}

// Is reports whether target is ErrUnknownUser.
func (e *UnknownUserError) Is(target error) bool { return target == ErrUnknownUser }

// StatusError reports a TigerBeetle result that this package did not expect:
// which operation, which event of the batch, and the status TigerBeetle gave.
type StatusError struct {
	Op     string // "create_accounts" or "create_transfers"
	Index  int    // the event's index in the batch
	Status string // TigerBeetle's name for the status, e.g. "TransferExceedsDebits"
	Code   uint32 // TigerBeetle's numeric status
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("ledger: %s: event %d: unexpected status %s (%d)", e.Op, e.Index, e.Status, e.Code)
}

// transferStatusError is the error of status s of event i of a
// create_transfers that no outcome of package status covers.
func transferStatusError(i int, s tb.CreateTransferStatus) error {
	return &StatusError{Op: "create_transfers", Index: i, Status: s.String(), Code: uint32(s)}
}

// accountStatusError is the error of status s of event i of a
// create_accounts that no outcome of package status covers.
func accountStatusError(i int, s tb.CreateAccountStatus) error {
	return &StatusError{Op: "create_accounts", Index: i, Status: s.String(), Code: uint32(s)}
}
