package cmdutil

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

// GlobalOptions are the flags every command takes.
type GlobalOptions struct {
	Addresses  []string
	ClusterID  uint64
	Data       string
	Output     string
	Timeout    time.Duration
	Verbose    bool
	MaxMemory  string
	Cache      string
	Checkpoint string
	// Server is a running tblimit serve --api whose cluster (or data
	// file) the command uses, with the token of $TBLIMIT_TOKEN or
	// TokenFile, over TLS with ServerCA or ServerTLS.
	Server    string
	TokenFile string
	ServerCA  string
	ServerTLS bool

	maxMemory  uint64 // MaxMemory parsed (Prepare)
	cache      uint64 // Cache parsed (Prepare); 0: the engine's default
	checkpoint uint64 // Checkpoint parsed (Prepare); 0: the engine's default
}

// EnvFlags are the global flags that TBLIMIT_<FLAG> environment variables set.
var EnvFlags = []string{"addresses", "cluster-id", "data", "output", "timeout", "max-memory", "cache", "checkpoint", "server", "token-file", "server-ca", "server-tls"}

// engineFlags are the global flags that set the embedded engine, which
// --addresses and --server have none of.
var engineFlags = []string{"max-memory", "cache", "checkpoint"}

// EnvName returns the environment variable of a flag: TBLIMIT_CLUSTER_ID for cluster-id.
func EnvName(flag string) string {
	return "TBLIMIT_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Bind adds the global flags to fs.
func (g *GlobalOptions) Bind(fs *pflag.FlagSet) {
	fs.StringSliceVar(&g.Addresses, "addresses", nil, "TigerBeetle cluster addresses, comma-separated (3000, 127.0.0.1:3000); none: the embedded engine in --data [env]")
	fs.Uint64Var(&g.ClusterID, "cluster-id", 0, "TigerBeetle cluster ID [env]")
	fs.StringVar(&g.Data, "data", "", "the embedded engine's data file, used when no --addresses are given (default "+defaultDataHelp()+") [env]")
	fs.StringVarP(&g.Output, "output", "o", "text", "output format: text or json [env]")
	fs.DurationVar(&g.Timeout, "timeout", 5*time.Second, "how long a call waits for the cluster before it fails [env]")
	fs.StringVar(&g.MaxMemory, "max-memory", "", "the embedded engine's bound on this process's live heap (512MiB, 8GiB; 0: none): warned of from half of it, new decisions refused past it (default half the machine's or cgroup's memory) [env]")
	fs.StringVar(&g.Cache, "cache", "", "the embedded engine's cache of stored accounts, transfers and history, Pebble's memory tables included, besides its index of account IDs and its pending transfers' expiry (64MiB default) [env]")
	fs.StringVar(&g.Checkpoint, "checkpoint", "", "how much of the embedded engine's journal it writes between two checkpoints of its store (3MiB default): larger decides faster and holds more memory, what changed since the last checkpoint; a start after a crash replays at most that [env]")
	fs.StringVar(&g.Server, "server", "", "act through a running tblimit serve --api at this gRPC address (127.0.0.1:8081), on the cluster or data file it uses; its token from $"+TokenEnv+" or --token-file [env]")
	fs.StringVar(&g.TokenFile, "token-file", "", "with --server: a file whose first line is the bearer token (a token allowed admin on \"*\") [env]")
	fs.StringVar(&g.ServerCA, "server-ca", "", "with --server: reach it over TLS, trusting this CA (PEM) [env]")
	fs.BoolVar(&g.ServerTLS, "server-tls", false, "with --server: reach it over TLS, trusting the system's CAs [env]")
	fs.BoolVar(&g.Verbose, "verbose", false, "also print the TigerBeetle client's own log lines (a warning per reconnect attempt) on stderr")
}

// Prepare applies the environment to the flags not given on the command
// line and validates the global flags.
func (g *GlobalOptions) Prepare(cmd *cobra.Command) error {
	given := givenFlags(cmd.Root().PersistentFlags())
	if err := FromEnv(cmd.Root().PersistentFlags(), EnvFlags); err != nil {
		return err
	}
	if err := g.checkServer(cmd, given); err != nil {
		return err
	}
	if g.Verbose && nativeLogs != nil {
		nativeLogs.keepAll()
	}
	switch g.Output {
	case "text", "json":
	default:
		return Usagef("--output %q: want text or json", g.Output)
	}
	if g.Timeout <= 0 {
		return Usagef("--timeout %s: must be positive", g.Timeout)
	}
	if len(g.Addresses) > 0 && cmd.Root().PersistentFlags().Changed("data") {
		return Usagef("--data is the embedded engine's data file: with --addresses, there is none (give one or the other)")
	}
	for _, a := range g.Addresses {
		if strings.TrimSpace(a) == "" {
			return Usagef("--addresses %q: an address is empty", strings.Join(g.Addresses, ","))
		}
	}
	for _, name := range engineFlags {
		if len(g.Addresses) > 0 && cmd.Root().PersistentFlags().Changed(name) {
			return Usagef("--%s is the embedded engine's: with --addresses, there is none (give one or the other)", name)
		}
	}
	if g.Cache != "" {
		n, err := ParseBytes(g.Cache)
		if err != nil {
			return Usagef("--cache %v", err)
		}
		g.cache = n
	}
	if g.Checkpoint != "" {
		n, err := ParseBytes(g.Checkpoint)
		if err != nil || n == 0 {
			return Usagef("--checkpoint %q: want a size of journal above 0, such as 4MiB or 16MiB", g.Checkpoint)
		}
		g.checkpoint = n
	}
	if len(g.Addresses) == 0 && g.Server == "" {
		bound, err := memoryBound(g.MaxMemory)
		if err != nil {
			return Usagef("--max-memory %v", err)
		}
		g.maxMemory = bound
	}
	return nil
}

// checkServer refuses --server beside the flags of another cluster, and
// its own flags without it; given are the flags the command line gave
// (read before the environment). An explicit flag wins over the
// environment, as everywhere: --server with $TBLIMIT_DATA set acts through
// serve, --data with $TBLIMIT_SERVER set opens the data file; both on the
// command line, or both from the environment, are a usage error. The
// commands marked Local refuse --server and its flags on the command line,
// and leave $TBLIMIT_SERVER to the others.
func (g *GlobalOptions) checkServer(cmd *cobra.Command, given map[string]bool) error {
	fs := cmd.Root().PersistentFlags()
	if isLocal(cmd) {
		for _, name := range serverFlags {
			if given[name] {
				return Usagef("--%s is for the commands that act through a running serve: tblimit %s acts on this machine",
					name, strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "))
			}
		}
		g.clearServer()
		return nil
	}
	for _, name := range append([]string{"addresses", "data"}, engineFlags...) {
		switch {
		case g.Server == "" || !fs.Changed(name):
		case given["server"] && !given[name]:
			g.Addresses, g.Data, g.MaxMemory, g.Cache, g.Checkpoint = nil, "", "", "", "" // from the environment: --server wins
		case !given["server"] && given[name]:
			g.clearServer() // $TBLIMIT_SERVER: the explicit flag wins
		default:
			return Usagef("--server acts on the cluster or data file of the tblimit serve it names: %s is not for it (give one or the other)", source(given, name))
		}
	}
	if g.Server == "" {
		for _, name := range serverFlags[1:] {
			if given[name] {
				return Usagef("--%s goes with --server", name)
			}
		}
		g.clearServer() // from the environment, with no server to go with
		return nil
	}
	if g.ServerCA != "" && g.ServerTLS {
		return Usagef("--server-ca and --server-tls: give one (--server-ca trusts that CA, --server-tls the system's)")
	}
	return nil
}

// serverFlags are --server and the flags that go with it.
var serverFlags = []string{"server", "token-file", "server-ca", "server-tls"}

func (g *GlobalOptions) clearServer() {
	g.Server, g.TokenFile, g.ServerCA, g.ServerTLS = "", "", "", false
}

// givenFlags are the flags of fs the command line gave.
func givenFlags(fs *pflag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { given[f.Name] = f.Changed })
	return given
}

// source names flag name as the user gave it: --name, or $TBLIMIT_NAME.
func source(given map[string]bool, name string) string {
	if given[name] {
		return "--" + name
	}
	return "$" + EnvName(name)
}

// localAnnotation marks the commands that act on this machine only.
const localAnnotation = "tblimit.local"

// Local marks cmd and its subcommands as acting on this machine only
// (serve, which holds the ledger; tigerbeetle, a local server; demo, an
// in-memory engine): --server is a usage error there, and $TBLIMIT_SERVER
// is left to the other commands.
func Local(cmd *cobra.Command) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[localAnnotation] = "true"
}

func isLocal(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Annotations[localAnnotation] != "" {
			return true
		}
	}
	return false
}

// FromEnv sets the flags of fs named in names from TBLIMIT_<FLAG> where
// the command line did not give them.
func FromEnv(fs *pflag.FlagSet, names []string) error {
	for _, name := range names {
		v, ok := os.LookupEnv(EnvName(name))
		if !ok || v == "" || fs.Changed(name) {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return Usagef("$%s=%q: %s", EnvName(name), v, want(fs.Lookup(name), err))
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
	dir, err := DataHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "embedded.journal"), nil
}

// DataHome is tblimit's per-user data directory.
func DataHome() (string, error) {
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
func (g *GlobalOptions) connect(clock embedded.Clock, stderr io.Writer) (*ledger.Client, func(), error) {
	// A command makes one decision and reports it: exact, at the cost of a
	// read (see ledger.WithExactDecisions).
	return g.Open(clock, stderr, ledger.WithExactDecisions())
}

// Open is connect with the ledger.Client's options of the caller's choice.
func (g *GlobalOptions) Open(clock embedded.Clock, stderr io.Writer, opts ...ledger.Option) (*ledger.Client, func(), error) {
	opts = append([]ledger.Option{ledger.WithTimeout(g.Timeout)}, opts...)
	if g.Server != "" {
		return g.openServer(opts...)
	}
	if len(g.Addresses) > 0 {
		c, err := ledger.Dial(g.ClusterID, g.Addresses, opts...)
		if errors.Is(err, ledger.ErrInvalidAddress) {
			return nil, nil, Usagef("--addresses: %w", err)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("--addresses %s: %w", strings.Join(g.Addresses, ","), err)
		}
		return c, c.Close, nil
	}
	path := g.Data
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
	if g.cache > 0 {
		eopts = append(eopts, embedded.WithCacheSize(int64(min(g.cache, 1<<62))))
	}
	if g.checkpoint > 0 {
		eopts = append(eopts, embedded.WithCheckpointBytes(int64(min(g.checkpoint, 1<<62))))
	}
	warn := warnTo(stderr)
	eopts = append(eopts, embedded.WithProgress(progressTo(stderr, path)))
	f, err := embedded.Open(path, eopts...)
	switch {
	case errors.Is(err, embedded.ErrBusy):
		return nil, nil, Hint(err, "another tblimit command is using it, or tblimit serve holds it: wait for the command to finish, "+
			"act through the running serve with --server ADDR (its gRPC address; serve --api), or give another --data")
	case err != nil:
		return nil, nil, err
	}
	if r := f.Recovered(); r != nil {
		fmt.Fprintln(stderr, "tblimit: notice:", r)
	}
	stop := newEngineGuard(f, g.maxMemory, warn).start(time.Second)
	return ledger.New(f, opts...), func() { stop(); f.Close() }, nil
}

// progressTo returns a WithProgress function that tells stderr how far
// Open is in applying the journal at path to its store: once per tenth,
// for a journal of more than 64 MiB (one written before stores, applied
// once).
func progressTo(stderr io.Writer, path string) func(done, total int64) {
	next := int64(0)
	return func(done, total int64) {
		if total < 64<<20 || done < next {
			return
		}
		fmt.Fprintf(stderr, "tblimit: notice: applying the journal %s to its store %s: %d%% of %s\n",
			path, embedded.StorePath(path), done*100/total, formatBytes(uint64(total)))
		next = done + total/10
	}
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
