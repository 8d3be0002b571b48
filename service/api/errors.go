package api

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tblimit/tblimit/ledger"
)

var (
	// errOverLimit means an amount exceeds a user's whole limit: it can
	// never be admitted, so it is the caller's error, not a denial.
	errOverLimit = errors.New("api: amount over the whole limit")
	// errInvalid means a request's field is out of range.
	errInvalid = errors.New("api: invalid argument")
	// ErrTokenFile means a token file (LoadTokens) could not be read or
	// does not parse; the message names the file and the line.
	ErrTokenFile = errors.New("api: token file")
)

// statusOf is the one switch from the library's errors to gRPC statuses
// (and, through httpStatus, HTTP's). An error that is a status already
// (from Authorize) is kept.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	var c codes.Code
	switch {
	case errors.Is(err, ledger.ErrUnavailable):
		c = codes.Unavailable
	case errors.Is(err, ledger.ErrUnknownResource), errors.Is(err, ledger.ErrUnknownUser),
		errors.Is(err, ledger.ErrUnknownReservation):
		c = codes.NotFound
	case errors.Is(err, ledger.ErrIDReused):
		c = codes.AlreadyExists
	case errors.Is(err, ledger.ErrReservationExpired), errors.Is(err, ledger.ErrReservationEnded):
		c = codes.FailedPrecondition
	case errors.Is(err, errOverLimit), errors.Is(err, errInvalid),
		errors.Is(err, ledger.ErrInvalidKey), errors.Is(err, ledger.ErrInvalidAmount),
		errors.Is(err, ledger.ErrInvalidID), errors.Is(err, ledger.ErrInvalidResource),
		errors.Is(err, ledger.ErrInvalidWindow), errors.Is(err, ledger.ErrTooMany):
		c = codes.InvalidArgument
	case errors.Is(err, context.Canceled):
		c = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		c = codes.DeadlineExceeded
	default:
		if st, ok := status.FromError(err); ok {
			return st.Err()
		}
		c = codes.Internal
	}
	return status.Error(c, err.Error())
}
