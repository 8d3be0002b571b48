package service_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

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
		err  error
		code codes.Code
		http int
	}{
		{ledger.ErrUnavailable, codes.Unavailable, http.StatusServiceUnavailable},
		{ledger.ErrInvalidResource, codes.InvalidArgument, http.StatusBadRequest},
		{ledger.ErrInvalidWindow, codes.InvalidArgument, http.StatusBadRequest},
		{ledger.ErrInvalidAmount, codes.InvalidArgument, http.StatusBadRequest},
		{ledger.ErrInvalidKey, codes.InvalidArgument, http.StatusBadRequest},
		{ledger.ErrInvalidID, codes.InvalidArgument, http.StatusBadRequest},
		{ledger.ErrIDReused, codes.AlreadyExists, http.StatusConflict},
		{ledger.ErrUnknownResource, codes.NotFound, http.StatusNotFound},
		{ledger.ErrUnknownUser, codes.NotFound, http.StatusNotFound},
		{ledger.ErrUnknownReservation, codes.NotFound, http.StatusNotFound},
		{ledger.ErrResourceMismatch, codes.FailedPrecondition, http.StatusConflict},
		{ledger.ErrReservationExpired, codes.FailedPrecondition, http.StatusConflict},
		{ledger.ErrReservationEnded, codes.FailedPrecondition, http.StatusConflict},
		{ledger.ErrTooMany, codes.InvalidArgument, http.StatusBadRequest},
		{recipes.ErrExceedsLimit, codes.InvalidArgument, http.StatusBadRequest},
		{recipes.ErrWouldExceedDeadline, codes.DeadlineExceeded, http.StatusGatewayTimeout},
		{service.Invalid("x: bad field"), codes.InvalidArgument, http.StatusBadRequest},
		{context.Canceled, codes.Canceled, http.StatusRequestTimeout},
		{context.DeadlineExceeded, codes.DeadlineExceeded, http.StatusGatewayTimeout},
		{errors.New("something else"), codes.Internal, http.StatusInternalServerError},
		{status.Error(codes.PermissionDenied, "no"), codes.PermissionDenied, http.StatusForbidden},
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
		if got := service.HTTPStatus(st.Code()); got != c.http {
			t.Errorf("HTTPStatus(%v) = %d, want %d", st.Code(), got, c.http)
		}
	}
	if service.Status(nil) != nil {
		t.Error("Status(nil) is not nil")
	}
}
