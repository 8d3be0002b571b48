package launch

import (
	"context"
	"io"
	"time"
)

const (
	// DefaultReadyTimeout bounds Start and StartCluster (format, start and the first
	// answer) unless WithReadyTimeout says otherwise.
	DefaultReadyTimeout = 60 * time.Second

	// DefaultStopTimeout is how long Stop waits after SIGTERM before it sends SIGKILL,
	// unless WithStopTimeout says otherwise.
	DefaultStopTimeout = 5 * time.Second
)

// Option configures Start and StartCluster.
type Option func(*config)

type config struct {
	binary       string
	clusterID    uint64
	port         int
	development  bool
	pipeline     int // --limit-pipeline-requests, 0: the server's default
	stderr       io.Writer
	readyTimeout time.Duration
	stopTimeout  time.Duration
	probe        ProbeFunc
	peers        func(replica int, addresses []string) []string // see WithReplicaAddresses
}

func newConfig(opts []Option) config {
	c := config{readyTimeout: DefaultReadyTimeout, stopTimeout: DefaultStopTimeout, probe: nopProbe}
	for _, opt := range opts {
		opt(&c)
	}
	return c
}

// WithBinary runs this tigerbeetle executable instead of the one FindBinary("") finds
// ($TIGERBEETLE_BIN, else tigerbeetle on PATH).
func WithBinary(path string) Option { return func(c *config) { c.binary = path } }

// BinaryOption returns the path the last WithBinary in opts gives, or "" if none does.
func BinaryOption(opts ...Option) string { return newConfig(opts).binary }

// WithClusterID formats data files for this cluster ID instead of 0. A client with another
// cluster ID never gets an answer.
func WithClusterID(id uint64) Option { return func(c *config) { c.clusterID = id } }

// WithPort listens on this loopback port; a cluster's replicas listen on port, port+1, ...
// Without it, or with 0, Start lets the server pick a free port itself (tigerbeetle's
// --addresses=0 mode, which also makes the server exit when the launching process dies,
// since its standard input then closes), and StartCluster picks free ports before it starts
// the replicas, since each replica must be given every replica's address. With a fixed port
// the readiness client may log "ConnectionRefused" warnings until the server listens.
func WithPort(port int) Option { return func(c *config) { c.port = port } }

// WithDevelopment passes --development to format and start (off by default): no Direct I/O
// needed (tmpfs, overlay file systems), small caches, and requests capped at 32 KiB (about
// 250 transfers instead of 8189). Right for tests, wrong for benchmarks.
func WithDevelopment(on bool) Option { return func(c *config) { c.development = on } }

// WithPipelineRequests starts the servers with --experimental
// --limit-pipeline-requests=n, which sets how many client connections a
// replica accepts: 8 + n (n is 24 by default, 0 with --development; at most
// 57). 0 keeps the server's default.
func WithPipelineRequests(n int) Option { return func(c *config) { c.pipeline = n } }

// ClientConnections is how many client connections a replica started with
// these settings accepts: TigerBeetle 0.17.9 sizes a replica's connections
// as the other replicas, 8 + --limit-pipeline-requests clients, and one to
// shut an overflow down.
func ClientConnections(development bool, pipelineRequests int) int {
	switch {
	case pipelineRequests > 0:
		return 8 + pipelineRequests
	case development:
		return 8
	}
	return 32
}

// MaxPipelineRequests is the most --limit-pipeline-requests TigerBeetle 0.17.9 takes.
const MaxPipelineRequests = 57

// WithStderr copies the servers' output (stdout and stderr) to w as it comes. The last
// 64 KiB of each replica's output are kept in any case; see Process.Stderr.
func WithStderr(w io.Writer) Option { return func(c *config) { c.stderr = w } }

// WithReadyTimeout bounds the whole of Start or StartCluster (formatting, starting and
// waiting for the first answer), and each RestartReplica. The default is
// DefaultReadyTimeout.
func WithReadyTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.readyTimeout = d
		}
	}
}

// WithStopTimeout is how long Stop waits after SIGTERM before SIGKILL. The default is
// DefaultStopTimeout.
func WithStopTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.stopTimeout = d
		}
	}
}

// WithReplicaAddresses gives each replica of a cluster its own address list: StartCluster
// and RestartReplica start replica i with f(i, addresses) instead of the cluster's
// addresses, so that what a replica dials to reach another can be a proxy (see
// testenv.StartMeshCluster). The list must have one entry per replica, and entry i must be
// addresses[i], where replica i listens. A replica dials only the replicas after it in the
// list (TigerBeetle's message bus); the others dial it.
func WithReplicaAddresses(f func(replica int, addresses []string) []string) Option {
	return func(c *config) { c.peers = f }
}

// ProbeFunc returns nil once the cluster at addresses answered a client of clusterID. It
// must return promptly when ctx is done.
type ProbeFunc func(ctx context.Context, clusterID uint64, addresses []string) error

// WithProbe replaces how Start and StartCluster decide that the servers answer. The default
// waits for a client's Nop; a stand-in that does not speak TigerBeetle's protocol (a fake in
// tests) needs another.
func WithProbe(p ProbeFunc) Option { return func(c *config) { c.probe = p } }
