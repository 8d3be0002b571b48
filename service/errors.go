package service

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/recipes"
)

// ErrInvalidArgument is a caller's mistake that a protocol finds in a
// request (a field out of range) before the library sees it. Make one with
// Invalid.
var ErrInvalidArgument = errors.New("service: invalid argument")

// Invalid is an error with message msg that is ErrInvalidArgument.
func Invalid(msg string) error { return invalid(msg) }

type invalid string

func (e invalid) Error() string        { return string(e) }
func (e invalid) Is(target error) bool { return target == ErrInvalidArgument }

// Code is the gRPC code of err: the one table both protocols answer by.
// A caller's mistake is InvalidArgument (or NotFound for a name that does
// not exist), a cluster that did not answer Unavailable, a call that cannot
// apply to the state it found FailedPrecondition, an ID reused for another
// request AlreadyExists. An error that is a gRPC status already keeps its
// code; anything else is Internal.
func Code(err error) codes.Code {
	switch {
	case err == nil:
		return codes.OK
	case errors.Is(err, ledger.ErrUnavailable):
		return codes.Unavailable
	case errors.Is(err, ledger.ErrUnknownResource), errors.Is(err, ledger.ErrUnknownUser),
		errors.Is(err, ledger.ErrUnknownReservation):
		return codes.NotFound
	case errors.Is(err, ledger.ErrIDReused):
		return codes.AlreadyExists
	case errors.Is(err, ledger.ErrReservationExpired), errors.Is(err, ledger.ErrReservationEnded),
		errors.Is(err, ledger.ErrResourceMismatch):
		return codes.FailedPrecondition
	case errors.Is(err, ErrInvalidArgument), errors.Is(err, recipes.ErrExceedsLimit),
		errors.Is(err, ledger.ErrInvalidKey), errors.Is(err, ledger.ErrInvalidAmount),
		errors.Is(err, ledger.ErrInvalidID), errors.Is(err, ledger.ErrInvalidResource),
		errors.Is(err, ledger.ErrInvalidWindow), errors.Is(err, ledger.ErrTooMany):
		return codes.InvalidArgument
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, recipes.ErrWouldExceedDeadline):
		return codes.DeadlineExceeded
	}
	if st, ok := status.FromError(err); ok {
		return st.Code()
	}
	return codes.Internal
}

// Status is err as a gRPC status error (nil for nil): its code is Code's,
// its message err's. An error that is a status already is kept whole.
func Status(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	return status.Error(Code(err), err.Error())
}

// HTTPStatus is the HTTP status that answers a gRPC code, for the JSON
// forms of both protocols.
func HTTPStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.FailedPrecondition, codes.Aborted:
		return http.StatusConflict
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unavailable, codes.ResourceExhausted: // overloaded, not over a limit
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.Canceled:
		return http.StatusRequestTimeout // the caller gave up
	case codes.Unimplemented:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}
