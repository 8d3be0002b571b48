package service

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
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

// Domain is the domain of the google.rpc.ErrorInfo of every error the
// services answer.
const Domain = "tblimit.dev"

// The reasons an error's ErrorInfo carries: stable names a program switches
// on (docs/api.md lists them with their codes). A denial is not an error:
// it is a decision whose reason is LIMIT_EXCEEDED or INSUFFICIENT_FUNDS.
const (
	ReasonUnavailable         = "UNAVAILABLE"           // the cluster did not answer in time: safe to retry under the same request ID
	ReasonUnknownResource     = "UNKNOWN_RESOURCE"      // no resource of that name or ledger
	ReasonUnknownUser         = "UNKNOWN_USER"          // no such user on the resource (which is not lazy)
	ReasonUnknownReservation  = "UNKNOWN_RESERVATION"   // no reservation of that ID
	ReasonRequestIDReused     = "REQUEST_ID_REUSED"     // the request ID named another request
	ReasonReservationExpired  = "RESERVATION_EXPIRED"   // the reservation's time ran out
	ReasonReservationEnded    = "RESERVATION_ENDED"     // the reservation was committed or cancelled already
	ReasonResourceConflict    = "RESOURCE_CONFLICT"     // a resource's ledger or name holds another definition
	ReasonLimitChanging       = "LIMIT_CHANGING"        // Audit: the user's limit changed each time it was read; retry
	ReasonLimitExceeded       = "LIMIT_EXCEEDED"        // the amount exceeds the user's whole limit: it can never be admitted
	ReasonInvalidKey          = "INVALID_KEY"           // a user key breaks the key rule
	ReasonInvalidAmount       = "INVALID_AMOUNT"        // an amount is 0 or too large
	ReasonInvalidID           = "INVALID_ID"            // a request or reservation ID is malformed
	ReasonInvalidResource     = "INVALID_RESOURCE"      // a resource definition is invalid, or the wrong kind for the call
	ReasonInvalidWindow       = "INVALID_WINDOW"        // a window is not whole seconds in range
	ReasonTooMany             = "TOO_MANY"              // more parts or users than one call takes
	ReasonInvalidArgument     = "INVALID_ARGUMENT"      // another field out of range, or a body that does not parse
	ReasonRequestIDRequired   = "REQUEST_ID_REQUIRED"   // the server requires a request ID on this call
	ReasonOverloaded          = "OVERLOADED"            // the server has as many calls deciding as it takes
	ReasonUnauthenticated     = "UNAUTHENTICATED"       // no bearer token, or one the server does not have
	ReasonPermissionDenied    = "PERMISSION_DENIED"     // the token lacks the permission on the resource
	ReasonCancelled           = "CANCELLED"             // the caller gave up
	ReasonDeadlineExceeded    = "DEADLINE_EXCEEDED"     // no answer before the caller's deadline
	ReasonWouldExceedDeadline = "WOULD_EXCEED_DEADLINE" // the units return after the caller's deadline
	ReasonNotFound            = "NOT_FOUND"             // no such method or path
	ReasonMethodNotAllowed    = "METHOD_NOT_ALLOWED"    // a path answered only to POST
	ReasonTooLarge            = "REQUEST_TOO_LARGE"     // a body over the server's bound
	ReasonInternal            = "INTERNAL"              // the server's fault
)

// kinds is the one table both protocols answer by: each library error,
// its gRPC code and its reason. The first that err is decides (so a more
// specific error comes before the one it wraps).
var kinds = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{ledger.ErrUnavailable, codes.Unavailable, ReasonUnavailable},
	{ledger.ErrUnknownResource, codes.NotFound, ReasonUnknownResource},
	{ledger.ErrUnknownUser, codes.NotFound, ReasonUnknownUser},
	{ledger.ErrUnknownReservation, codes.NotFound, ReasonUnknownReservation},
	{ledger.ErrIDReused, codes.AlreadyExists, ReasonRequestIDReused},
	{ledger.ErrReservationExpired, codes.FailedPrecondition, ReasonReservationExpired},
	{ledger.ErrReservationEnded, codes.FailedPrecondition, ReasonReservationEnded},
	{ledger.ErrResourceMismatch, codes.FailedPrecondition, ReasonResourceConflict},
	{ledger.ErrLimitChanging, codes.Aborted, ReasonLimitChanging},
	{recipes.ErrExceedsLimit, codes.InvalidArgument, ReasonLimitExceeded},
	{ErrExceedsLimit, codes.InvalidArgument, ReasonLimitExceeded},
	{ErrRequestIDRequired, codes.InvalidArgument, ReasonRequestIDRequired},
	{ledger.ErrInvalidKey, codes.InvalidArgument, ReasonInvalidKey},
	{ledger.ErrInvalidAmount, codes.InvalidArgument, ReasonInvalidAmount},
	{ledger.ErrInvalidID, codes.InvalidArgument, ReasonInvalidID},
	{ledger.ErrInvalidWindow, codes.InvalidArgument, ReasonInvalidWindow},
	{ledger.ErrInvalidResource, codes.InvalidArgument, ReasonInvalidResource},
	{ledger.ErrTooMany, codes.InvalidArgument, ReasonTooMany},
	{ledger.ErrMalformed, codes.InvalidArgument, ReasonInvalidArgument},
	{ErrInvalidArgument, codes.InvalidArgument, ReasonInvalidArgument},
	{context.Canceled, codes.Canceled, ReasonCancelled},
	{recipes.ErrWouldExceedDeadline, codes.DeadlineExceeded, ReasonWouldExceedDeadline},
	{context.DeadlineExceeded, codes.DeadlineExceeded, ReasonDeadlineExceeded},
}

var (
	// ErrExceedsLimit means an amount exceeds a user's whole limit: it can
	// never be admitted, so it is the caller's error, not a denial.
	ErrExceedsLimit = errors.New("service: amount over the whole limit")
	// ErrRequestIDRequired means the server requires a request ID
	// (tblimit serve --require-request-id) and the call has none.
	ErrRequestIDRequired = errors.New("service: request_id required")
)

// Code is the gRPC code of err: the one table both protocols answer by.
// A caller's mistake is InvalidArgument (or NotFound for a name that does
// not exist), a cluster that did not answer Unavailable, a call that cannot
// apply to the state it found FailedPrecondition, an ID reused for another
// request AlreadyExists. An error that is a gRPC status already keeps its
// code; anything else is Internal.
func Code(err error) codes.Code {
	code, _ := classify(err)
	return code
}

// Reason is the reason of err's ErrorInfo (see the Reason constants).
func Reason(err error) string {
	_, reason := classify(err)
	return reason
}

func classify(err error) (codes.Code, string) {
	if err == nil {
		return codes.OK, ""
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.code, k.reason
		}
	}
	if st, ok := status.FromError(err); ok {
		if info := infoOf(st); info != nil {
			return st.Code(), info.GetReason()
		}
		return st.Code(), codeReason(st.Code())
	}
	return codes.Internal, ReasonInternal
}

// codeReason is the reason of a status made without one (by gRPC itself):
// its code's name.
func codeReason(c codes.Code) string {
	switch c {
	case codes.Canceled:
		return ReasonCancelled
	case codes.ResourceExhausted:
		return ReasonOverloaded
	case codes.Unknown:
		return ReasonInternal
	}
	if c > codes.Unauthenticated {
		return ReasonInternal
	}
	return toUpperSnake(c.String())
}

// toUpperSnake turns gRPC's "InvalidArgument" into "INVALID_ARGUMENT".
func toUpperSnake(s string) string {
	out := make([]byte, 0, len(s)+4)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			if i > 0 {
				out = append(out, '_')
			}
		} else if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		out = append(out, c)
	}
	return string(out)
}

// infoOf is st's ErrorInfo, nil if it has none.
func infoOf(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// maxMessage bounds an error's message: what a caller sent is never
// echoed whole (the library clips what it quotes; this is the backstop).
const maxMessage = 1024

// Status is err as a gRPC status error (nil for nil), with a
// google.rpc.ErrorInfo of Domain and err's reason: its code is Code's, its
// message err's, at most 1 KiB of it. An error that is a status already
// keeps its code and message, and gets an ErrorInfo if it has none.
func Status(err error) error {
	if err == nil {
		return nil
	}
	code, reason := classify(err)
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		if infoOf(st) != nil {
			return st.Err()
		}
		msg = st.Message()
	}
	return Errorf(code, reason, "%s", clipMessage(msg))
}

// Errorf is a status error of code with an ErrorInfo of reason: an error a
// protocol finds on its own (a token missing, a body that does not parse).
func Errorf(code codes.Code, reason, format string, args ...any) error {
	st := status.Newf(code, format, args...)
	if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: Domain}); err == nil {
		st = withInfo
	}
	return st.Err()
}

// clipMessage cuts msg to maxMessage bytes, on a character's start.
func clipMessage(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage
	for cut > 0 && msg[cut]&0xC0 == 0x80 {
		cut--
	}
	return msg[:cut] + "…"
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
