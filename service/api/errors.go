package api

import (
	"errors"

	"github.com/tblimit/tblimit/service"
)

var (
	// errInvalid means a request's field is out of range.
	errInvalid = service.Invalid("api: invalid argument")
	// ErrTokenFile means a token file (LoadTokens) could not be read or
	// does not parse; the message names the file and the line.
	ErrTokenFile = errors.New("api: token file")
)

// statusOf is err as a gRPC status, by the services' one table
// (service.Code). An error that is a status already (from Authorize) is
// kept.
func statusOf(err error) error { return service.Status(err) }
