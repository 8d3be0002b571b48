package serve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/service/tracing"
)

// tracingFlush bounds the flush of the spans still buffered when serve
// stops.
const tracingFlush = 5 * time.Second

// startTracing starts the tracing the OTEL_* variables ask for (none
// unless they do; see tracing.FromEnv), its console exporter writing to
// opts.Out, and returns it with the function that flushes and stops it,
// within tracingFlush of its own since ctx is done by then.
func startTracing(ctx context.Context, opts *serveOptions) (*tracing.Tracing, func(), error) {
	t, err := tracing.FromEnv(ctx, opts.Out)
	if errors.Is(err, tracing.ErrConfig) {
		return nil, nil, cmdutil.AsUsage(err)
	}
	if err != nil {
		return nil, nil, err
	}
	return t, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlush)
		defer cancel()
		if err := t.Shutdown(sctx); err != nil {
			fmt.Fprintf(opts.ErrOut, "spans may be lost: %v\n", err)
		}
	}, nil
}
