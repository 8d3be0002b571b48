package root

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
)

// Every command checks its arguments, and every error of the command line
// is a usage error by its type, whatever cobra or pflag made it.
func TestUsageErrorsHaveAType(t *testing.T) {
	f := cmdutil.NewFactory(strings.NewReader(""), io.Discard, io.Discard)
	root := newRoot(f)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Args == nil {
			t.Errorf("%s has no Args check", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	for _, args := range [][]string{
		{"frobnicate"},
		{"resourcs"},
		{"users", "frobnicate"},
		{"completion", "tcsh"},
		{"acquire"},
		{"acquire", "api", "alice", "--bogus"},
		{"acquire", "api", "alice", "-3"},
		{"usage", "api", "alice", "--max", "many"},
		{"--timeout"},
		{"-o", "yaml", "resources", "list"},
	} {
		var stderr strings.Builder
		f := cmdutil.NewFactory(strings.NewReader(""), io.Discard, &stderr)
		f.Global.Data = t.TempDir() + "/never.journal"
		if code := run(t.Context(), args, f); code != cmdutil.ExitUsage {
			t.Errorf("tblimit %s = exit %d (%q), want %d", strings.Join(args, " "), code, stderr.String(), cmdutil.ExitUsage)
		}
	}
}
