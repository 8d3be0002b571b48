package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

// globalOptions are the flags every command takes, and the process's
// standard streams.
type globalOptions struct {
	addresses []string
	clusterID uint64
	data      string
	output    string
	timeout   time.Duration
	verbose   bool

	stdin          io.Reader
	stdout, stderr io.Writer
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
	fs := cmd.Root().PersistentFlags()
	for _, name := range envFlags {
		v, ok := os.LookupEnv(envName(name))
		if !ok || v == "" || fs.Changed(name) {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return usagef("$%s: %v", envName(name), err)
		}
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
	for _, a := range g.addresses {
		if strings.TrimSpace(a) == "" {
			return usagef("--addresses %q: an address is empty", strings.Join(g.addresses, ","))
		}
	}
	return nil
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

// clockKey carries, in tests, the clock the embedded engine stamps requests
// with.
type clockKey struct{}

// nowIn returns the time: the test's clock in tests, else the system's.
func nowIn(ctx context.Context) time.Time {
	if c, ok := ctx.Value(clockKey{}).(embedded.Clock); ok {
		return c.Now()
	}
	return time.Now()
}

// connect opens the cluster, or the embedded engine's data file. The caller
// must call the returned function when done: it closes the connection or
// the data file (releasing its lock).
func (g *globalOptions) connect(ctx context.Context) (*ledger.Client, func(), error) {
	if len(g.addresses) > 0 {
		// A command makes one decision and reports it: exact, at the cost
		// of a read (see ledger.WithExactDecisions).
		c, err := ledger.Dial(g.clusterID, g.addresses, ledger.WithTimeout(g.timeout), ledger.WithExactDecisions())
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
	var opts []embedded.Option
	if c, ok := ctx.Value(clockKey{}).(embedded.Clock); ok {
		opts = append(opts, embedded.WithClock(c))
	}
	f, err := embedded.Open(path, opts...)
	switch {
	case errors.Is(err, embedded.ErrBusy):
		return nil, nil, fmt.Errorf("%w (another tblimit command is using it: wait for it to finish, or give another --data)", err)
	case err != nil:
		return nil, nil, err
	}
	if r := f.Recovered(); r != nil {
		fmt.Fprintln(g.stderr, "tblimit: notice:", r)
	}
	return ledger.New(f, ledger.WithExactDecisions()), f.Close, nil
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

// explain adds what the user can do about an error from the cluster.
func (g *globalOptions) explain(err error) error {
	if errors.Is(err, ledger.ErrUnknownUser) && !strings.Contains(err.Error(), "tblimit users add") {
		return fmt.Errorf("%w (add it with tblimit users add)", err)
	}
	if errors.Is(err, ledger.ErrUnavailable) && len(g.addresses) > 0 {
		return fmt.Errorf("%w (is a cluster with ID %d running at %s? tblimit tigerbeetle status tells about a local one)",
			err, g.clusterID, strings.Join(g.addresses, ","))
	}
	return err
}

// run opens the ledger, runs f and closes the ledger again.
func (g *globalOptions) run(ctx context.Context, f func(c *ledger.Client) error) error {
	c, done, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	return g.explain(f(c))
}

// out returns the printer of the command's standard output.
func (g *globalOptions) out() *printer { return newPrinter(g.stdout, g.output == "json") }

// resolve finds a resource by name, or by ledger number.
func resolve(ctx context.Context, c *ledger.Client, arg string) (ledger.Resource, error) {
	all, err := c.Resources(ctx)
	if err != nil {
		return ledger.Resource{}, err
	}
	var named []ledger.Resource
	for _, r := range all {
		if r.Name == arg {
			named = append(named, r)
		}
	}
	switch len(named) {
	case 1:
		return named[0], nil
	case 0:
	default:
		return ledger.Resource{}, fmt.Errorf("resource %q is ambiguous: ledgers %d and %d both have that name; give the ledger number", arg, named[0].Ledger, named[1].Ledger)
	}
	if n, err := strconv.ParseUint(arg, 10, 32); err == nil {
		for _, r := range all {
			if uint64(r.Ledger) == n {
				return r, nil
			}
		}
	}
	names := make([]string, len(all))
	for i, r := range all {
		names[i] = r.Name
	}
	known := "there are none yet: create one with tblimit resources create"
	if len(names) > 0 {
		known = "known: " + strings.Join(names, ", ")
	}
	return ledger.Resource{}, fmt.Errorf("%w %q (%s)", errUnknownResource, arg, known)
}

var errUnknownResource = errors.New("unknown resource")

// completeResources completes a resource argument with the names of the
// resources there are.
func completeResources(g *globalOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		if g.prepare(cmd) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
		defer cancel()
		var out []cobra.Completion
		_ = g.run(ctx, func(c *ledger.Client) error {
			rs, err := c.Resources(ctx)
			for _, r := range rs {
				out = append(out, cobra.CompletionWithDesc(r.Name, r.String()))
			}
			return err
		})
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// input opens the file a command reads: standard input for "-". It returns
// the name to use in messages and a function that closes what it opened.
func (g *globalOptions) input(file string) (string, io.Reader, func(), error) {
	if file == "-" {
		return "stdin", g.stdin, func() {}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return "", nil, nil, err
	}
	return file, f, func() { f.Close() }, nil
}
