package service_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/recipes"
	"github.com/tblimit/tblimit/service"
)

// Every error the library returns has one code and one HTTP status, as
// both protocols answer it (wrapped, as the library returns them).
func TestCodeOfEveryLibraryError(t *testing.T) {
	cases := []struct {
		err    error
		code   codes.Code
		http   int
		reason string
	}{
		{ledger.ErrUnavailable, codes.Unavailable, http.StatusServiceUnavailable, "UNAVAILABLE"},
		{ledger.ErrInvalidResource, codes.InvalidArgument, http.StatusBadRequest, "INVALID_RESOURCE"},
		{ledger.ErrInvalidWindow, codes.InvalidArgument, http.StatusBadRequest, "INVALID_WINDOW"},
		{ledger.ErrInvalidAmount, codes.InvalidArgument, http.StatusBadRequest, "INVALID_AMOUNT"},
		{ledger.ErrInvalidKey, codes.InvalidArgument, http.StatusBadRequest, "INVALID_KEY"},
		{ledger.ErrInvalidID, codes.InvalidArgument, http.StatusBadRequest, "INVALID_ID"},
		{ledger.ErrIDReused, codes.AlreadyExists, http.StatusConflict, "REQUEST_ID_REUSED"},
		{ledger.ErrUnknownResource, codes.NotFound, http.StatusNotFound, "UNKNOWN_RESOURCE"},
		{ledger.ErrUnknownUser, codes.NotFound, http.StatusNotFound, "UNKNOWN_USER"},
		{ledger.ErrUnknownReservation, codes.NotFound, http.StatusNotFound, "UNKNOWN_RESERVATION"},
		{ledger.ErrResourceMismatch, codes.FailedPrecondition, http.StatusConflict, "RESOURCE_CONFLICT"},
		{ledger.ErrLimitChanging, codes.Aborted, http.StatusConflict, "LIMIT_CHANGING"},
		{ledger.ErrReservationExpired, codes.FailedPrecondition, http.StatusConflict, "RESERVATION_EXPIRED"},
		{ledger.ErrReservationEnded, codes.FailedPrecondition, http.StatusConflict, "RESERVATION_ENDED"},
		{ledger.ErrReservationCancelled, codes.FailedPrecondition, http.StatusConflict, "RESERVATION_ENDED"},
		{service.ErrExceedsLimit, codes.InvalidArgument, http.StatusBadRequest, "LIMIT_EXCEEDED"},
		{service.ErrRequestIDRequired, codes.InvalidArgument, http.StatusBadRequest, "REQUEST_ID_REQUIRED"},
		{status.Error(codes.ResourceExhausted, "full"), codes.ResourceExhausted, http.StatusServiceUnavailable, "OVERLOADED"},
		{ledger.ErrTooMany, codes.InvalidArgument, http.StatusBadRequest, "TOO_MANY"},
		{recipes.ErrExceedsLimit, codes.InvalidArgument, http.StatusBadRequest, "LIMIT_EXCEEDED"},
		{recipes.ErrWouldExceedDeadline, codes.DeadlineExceeded, http.StatusGatewayTimeout, "WOULD_EXCEED_DEADLINE"},
		{service.Invalid("x: bad field"), codes.InvalidArgument, http.StatusBadRequest, "INVALID_ARGUMENT"},
		{context.Canceled, codes.Canceled, http.StatusRequestTimeout, "CANCELLED"},
		{context.DeadlineExceeded, codes.DeadlineExceeded, http.StatusGatewayTimeout, "DEADLINE_EXCEEDED"},
		{errors.New("something else"), codes.Internal, http.StatusInternalServerError, "INTERNAL"},
		{status.Error(codes.PermissionDenied, "no"), codes.PermissionDenied, http.StatusForbidden, "PERMISSION_DENIED"},
	}
	for _, c := range cases {
		err := fmt.Errorf("call: %w", c.err)
		if got := service.Code(err); got != c.code {
			t.Errorf("Code(%v) = %v, want %v", err, got, c.code)
		}
		st := status.Convert(service.Status(err))
		if st.Code() != c.code {
			t.Errorf("Status(%v) has code %v, want %v", err, st.Code(), c.code)
		}
		if got := service.Reason(err); got != c.reason {
			t.Errorf("Reason(%v) = %q, want %q", err, got, c.reason)
		}
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			info, _ = d.(*errdetails.ErrorInfo)
		}
		if info.GetReason() != c.reason || info.GetDomain() != service.Domain {
			t.Errorf("Status(%v) has ErrorInfo %v, want reason %q", err, info, c.reason)
		}
		if got := service.HTTPStatus(st.Code()); got != c.http {
			t.Errorf("HTTPStatus(%v) = %d, want %d", st.Code(), got, c.http)
		}
	}
	if service.Status(nil) != nil {
		t.Error("Status(nil) is not nil")
	}
}
