package testenv

import (
	"context"
	"io"
	"time"

	"github.com/tblimit/tblimit/testenv/launch"
)

// The launcher moved to package launch, which does not import package testing. What
// follows forwards to it for code outside this repository's tests that still uses the old
// names (the benchmark harness); new code uses launch directly.

// EnvBinary is launch.EnvBinary.
//
// Deprecated: use launch.EnvBinary.
const EnvBinary = launch.EnvBinary

// DefaultReadyTimeout is launch.DefaultReadyTimeout.
//
// Deprecated: use launch.DefaultReadyTimeout.
const DefaultReadyTimeout = launch.DefaultReadyTimeout

// ErrNoBinary is launch.ErrNoBinary.
//
// Deprecated: use launch.ErrNoBinary.
var ErrNoBinary = launch.ErrNoBinary

// FindBinary is launch.FindBinary.
//
// Deprecated: use launch.FindBinary.
func FindBinary(explicit string) (string, error) { return launch.FindBinary(explicit) }

// Process is launch.Process.
//
// Deprecated: use launch.Process.
type Process = launch.Process

// Config is the old way to say what Launch starts.
//
// Deprecated: use launch.Start and its Options.
type Config struct {
	Binary       string
	Dir          string
	Port         int
	ClusterID    uint64
	Development  bool
	Stderr       io.Writer
	ReadyTimeout time.Duration
	StopTimeout  time.Duration
}

// Launch starts a single-replica server as cfg says.
//
// Deprecated: use launch.Start.
func Launch(ctx context.Context, cfg Config) (*Process, error) {
	return launch.Start(ctx, cfg.Dir,
		launch.WithBinary(cfg.Binary),
		launch.WithPort(cfg.Port),
		launch.WithClusterID(cfg.ClusterID),
		launch.WithDevelopment(cfg.Development),
		launch.WithStderr(cfg.Stderr),
		launch.WithReadyTimeout(cfg.ReadyTimeout),
		launch.WithStopTimeout(cfg.StopTimeout))
}
