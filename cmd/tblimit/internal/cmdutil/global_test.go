package cmdutil

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
)

// prepared returns the global options of a command line of args, after
// Prepare.
func prepared(t *testing.T, args ...string) (*GlobalOptions, error) {
	t.Helper()
	for _, name := range EnvFlags {
		t.Setenv(EnvName(name), "")
		os.Unsetenv(EnvName(name))
	}
	var g GlobalOptions
	cmd := &cobra.Command{Use: "tblimit", RunE: func(*cobra.Command, []string) error { return nil }}
	g.Bind(cmd.PersistentFlags())
	if err := cmd.PersistentFlags().Parse(args); err != nil {
		t.Fatal(err)
	}
	return &g, g.Prepare(cmd)
}

// The journal a data file keeps between two checkpoints is --checkpoint,
// and a new journal is given that much space: with one byte, the journal
// holds one request, checkpointed into the store as soon as it is written;
// with the default, 4 MiB.
func TestCheckpointFlagReachesTheEngine(t *testing.T) {
	journal := func(args ...string) int64 {
		t.Helper()
		data := filepath.Join(t.TempDir(), "data")
		g, err := prepared(t, append([]string{"--data", data}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		c, closeFn, err := g.Open(nil, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		defer closeFn()
		r := ledger.Resource{Name: "api", Ledger: 7, Kind: ledger.KindRequests, Window: time.Minute, DefaultLimit: 5}
		if err := c.CreateResource(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(data)
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	cut, kept := journal("--checkpoint", "1B"), journal()
	if cut >= kept {
		t.Errorf("journal after a request: %d bytes with --checkpoint 1B, %d with the default; want fewer (the space of one request)", cut, kept)
	}
}

func TestCheckpointFlagRefusesBadSizes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--checkpoint", "0"}, `--checkpoint "0": want a size of journal above 0`},
		{[]string{"--checkpoint", "lots"}, `--checkpoint "lots": want a size of journal above 0`},
		{[]string{"--checkpoint", "8 parsecs"}, `--checkpoint "8 parsecs": want a size of journal above 0`},
		{[]string{"--checkpoint", "8MiB", "--addresses", "3000"}, "--checkpoint is the embedded engine's"},
	} {
		_, err := prepared(t, tc.args...)
		var usage *UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: Prepare = %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}
