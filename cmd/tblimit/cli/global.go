package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// globalOptions are the flags every command takes.
type globalOptions struct {
	addresses []string
	clusterID uint64
	data      string
	output    string
	timeout   time.Duration
	verbose   bool
}

// envFlags are the global flags that TBLIMIT_<FLAG> environment variables set.
var envFlags = []string{"addresses", "cluster-id", "data", "output", "timeout"}

// envName returns the environment variable of a flag: TBLIMIT_CLUSTER_ID for cluster-id.
func envName(flag string) string {
	return "TBLIMIT_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func (g *globalOptions) bind(fs *pflag.FlagSet) {
	fs.StringSliceVar(&g.addresses, "addresses", nil, "TigerBeetle cluster addresses, comma-separated (3000, 127.0.0.1:3000); none: the embedded engine in --data [env]")
	fs.Uint64Var(&g.clusterID, "cluster-id", 0, "TigerBeetle cluster ID [env]")
	fs.StringVar(&g.data, "data", "", "the embedded engine's data file, used when no --addresses are given (default "+defaultDataHelp()+") [env]")
	fs.StringVarP(&g.output, "output", "o", "text", "output format: text or json [env]")
	fs.DurationVar(&g.timeout, "timeout", 5*time.Second, "how long a call waits for the cluster before it fails [env]")
	fs.BoolVar(&g.verbose, "verbose", false, "also print the TigerBeetle client's own log lines (a warning per reconnect attempt) on stderr")
}

// prepare applies the environment to the flags not given on the command
// line and validates the global flags.
func (g *globalOptions) prepare(cmd *cobra.Command) error {
	if err := fromEnv(cmd.Root().PersistentFlags(), envFlags); err != nil {
		return err
	}
	if g.verbose && nativeLogs != nil {
		nativeLogs.keepAll()
	}
	switch g.output {
	case "text", "json":
	default:
		return usagef("--output %q: want text or json", g.output)
	}
	if g.timeout <= 0 {
		return usagef("--timeout %s: must be positive", g.timeout)
	}
	if len(g.addresses) > 0 && cmd.Root().PersistentFlags().Changed("data") {
		return usagef("--data is the embedded engine's data file: with --addresses, there is none (give one or the other)")
	}
	for _, a := range g.addresses {
		if strings.TrimSpace(a) == "" {
			return usagef("--addresses %q: an address is empty", strings.Join(g.addresses, ","))
		}
	}
	return nil
}

// fromEnv sets the flags of fs named in names from TBLIMIT_<FLAG> where
// the command line did not give them.
func fromEnv(fs *pflag.FlagSet, names []string) error {
	for _, name := range names {
		v, ok := os.LookupEnv(envName(name))
		if !ok || v == "" || fs.Changed(name) {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return usagef("$%s=%q: %s", envName(name), v, want(fs.Lookup(name), err))
		}
	}
	return nil
}

// want says what flag f takes, for a value it refused with err.
func want(f *pflag.Flag, err error) string {
	switch f.Value.Type() {
	case "uint64", "uint32", "uint":
		return "want a whole number from 0 up"
	case "int", "int64":
		return "want a whole number"
	case "duration":
		return "want a duration such as 500ms, 5s, 1m or 2h"
	case "bool":
		return "want true or false"
	}
	return err.Error()
}

// defaultDataPath is where the embedded engine's data file lives unless
// --data says otherwise: $XDG_DATA_HOME/tblimit, else ~/.local/share/tblimit.
func defaultDataPath() (string, error) {
	dir, err := dataHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "embedded.journal"), nil
}

// dataHome is tblimit's per-user data directory.
func dataHome() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "tblimit"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory for the data file (give --data or set $XDG_DATA_HOME): %w", err)
	}
	return filepath.Join(home, ".local", "share", "tblimit"), nil
}

func defaultDataHelp() string {
	if runtime.GOOS == "windows" {
		return `%USERPROFILE%\.local\share\tblimit\embedded.journal`
	}
	return "$XDG_DATA_HOME/tblimit/embedded.journal or ~/.local/share/tblimit/embedded.journal"
}

// connect opens the cluster, or the embedded engine's data file (stamping
// requests with clock, if not nil; notices go to stderr). The caller must
// call the returned function when done: it closes the connection or the
// data file (releasing its lock).
func (g *globalOptions) connect(clock embedded.Clock, stderr io.Writer) (*ledger.Client, func(), error) {
	// A command makes one decision and reports it: exact, at the cost of a
	// read (see ledger.WithExactDecisions).
	return g.open(clock, stderr, ledger.WithExactDecisions())
}

// open is connect with the ledger.Client's options of the caller's choice.
func (g *globalOptions) open(clock embedded.Clock, stderr io.Writer, opts ...ledger.Option) (*ledger.Client, func(), error) {
	opts = append([]ledger.Option{ledger.WithTimeout(g.timeout)}, opts...)
	if len(g.addresses) > 0 {
		c, err := ledger.Dial(g.clusterID, g.addresses, opts...)
		if errors.Is(err, ledger.ErrInvalidAddress) {
			return nil, nil, usagef("--addresses: %w", err)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("--addresses %s: %w", strings.Join(g.addresses, ","), err)
		}
		return c, c.Close, nil
	}
	path := g.data
	if path == "" {
		var err error
		if path, err = defaultDataPath(); err != nil {
			return nil, nil, err
		}
	}
	if err := makeDir(filepath.Dir(path)); err != nil {
		return nil, nil, fmt.Errorf("--data %s: %w", path, err)
	}
	var eopts []embedded.Option
	if clock != nil {
		eopts = append(eopts, embedded.WithClock(clock))
	}
	f, err := embedded.Open(path, eopts...)
	switch {
	case errors.Is(err, embedded.ErrBusy):
		return nil, nil, hint(err, "another tblimit command is using it: wait for it to finish, or give another --data")
	case err != nil:
		return nil, nil, err
	}
	if r := f.Recovered(); r != nil {
		fmt.Fprintln(stderr, "tblimit: notice:", r)
	}
	return ledger.New(f, opts...), f.Close, nil
}

// makeDir creates dir and the directories above it that are missing, and
// makes their entries durable (fsync of each parent), so that a data file
// created inside survives a power cut with its directory.
func makeDir(dir string) error {
	dir = filepath.Clean(dir)
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := makeDir(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	parent, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return err
	}
	defer parent.Close()
	return parent.Sync()
}
