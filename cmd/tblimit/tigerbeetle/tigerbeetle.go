// Package tigerbeetle is tblimit tigerbeetle: a local TigerBeetle server or cluster.
package tigerbeetle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/internal/launch"
)

// serverEnv is what the tigerbeetle commands share: where the server lives,
// the global flags they use, and where they print.
type serverEnv struct {
	Printer func() *cmdutil.Printer
	ErrOut  io.Writer

	Dir       string        // --dir; "": next to the default data file
	ClusterID uint64        // --cluster-id
	Timeout   time.Duration // --timeout: how long status waits for an answer
}

// set takes the global flags, once cobra has parsed them.
func (e *serverEnv) set(g *cmdutil.GlobalOptions) { e.ClusterID, e.Timeout = g.ClusterID, g.Timeout }

// launchSpec is what up and serve start: the flags --port, --replicas,
// --binary and --development.
type launchSpec struct {
	Port             int
	Replicas         int
	Binary           string
	Development      bool
	PipelineRequests int // --limit-pipeline-requests; 0: the server's default
}

func (l *launchSpec) bind(fs *pflag.FlagSet, long bool) {
	port, replicas, binary, development := "the loopback port to listen on (0: any free port)", "the number of replicas",
		"the tigerbeetle binary", "run with --development"
	if long {
		port = "the loopback port to listen on; replica i listens on port+i (0: any free ports)"
		replicas = "the number of replicas: 3 makes a cluster that survives one replica down"
		binary = "the tigerbeetle binary (default: $TIGERBEETLE_BIN, else tigerbeetle on PATH)"
		development = "run with --development: small caches, no Direct I/O needed, requests capped at 32 KiB (fine for trying tblimit, wrong for benchmarks)"
	}
	fs.IntVar(&l.Port, "port", 3000, port)
	fs.IntVar(&l.Replicas, "replicas", 1, replicas)
	fs.StringVar(&l.Binary, "binary", "", binary)
	fs.BoolVar(&l.Development, "development", true, development)
	fs.IntVar(&l.PipelineRequests, "limit-pipeline-requests", 0, fmt.Sprintf(
		"start tigerbeetle with --experimental --limit-pipeline-requests=N: a replica then accepts 8+N client connections "+
			"(by default 32, 8 with --development; N at most %d); 0: the server's default", launch.MaxPipelineRequests))
}

// check validates --port and --replicas.
func (l *launchSpec) check() error {
	if l.Replicas < 1 || l.Replicas > launch.MaxReplicas {
		return cmdutil.Usagef("--replicas %d: want 1 to %d", l.Replicas, launch.MaxReplicas)
	}
	if l.Port < 0 || l.Port+l.Replicas-1 > 65535 {
		return cmdutil.Usagef("--port %d: want 0 to %d", l.Port, 65536-l.Replicas)
	}
	if l.PipelineRequests < 0 || l.PipelineRequests > launch.MaxPipelineRequests {
		return cmdutil.Usagef("--limit-pipeline-requests %d: want 0 to %d", l.PipelineRequests, launch.MaxPipelineRequests)
	}
	return nil
}

const (
	// StateFile, in the server's directory, is where the supervisor records
	// the state of the server (a ServerJSON); LogFile is the server's log.
	StateFile = "server.json"
	LogFile   = "tigerbeetle.log"

	// upWait bounds how long up waits for the supervisor: its start-up is bounded by
	// launch.DefaultReadyTimeout.
	upWait = launch.DefaultReadyTimeout + 10*time.Second
)

// ServerJSON is the state of the local server or cluster: tigerbeetle up / status / down,
// and the state file the supervisor writes. Running without Answering is a cluster whose
// processes are alive but that did not answer in time (busy, all its client sessions in
// use, or too few replicas up).
type ServerJSON struct {
	Running     bool     `json:"running"`    // a process the state file records is alive
	Answering   bool     `json:"answering"`  // and the cluster answered within --timeout
	PID         int      `json:"pid"`        // the supervising tblimit process
	ServerPID   int      `json:"server_pid"` // replica 0's
	Addresses   []string `json:"addresses"`
	ClusterID   uint64   `json:"cluster_id"`
	Dir         string   `json:"dir"`
	DataFile    string   `json:"data_file"` // replica 0's
	LogFile     string   `json:"log_file"`
	Development bool     `json:"development"`
	// ClientConnections is how many client connections each replica
	// accepts (its sessions are a cluster's 64 in any case).
	ClientConnections int           `json:"client_connections"`
	Started           string        `json:"started"`
	Replicas          []replicaJSON `json:"replicas"`

	pingErr error // why it is not answering, for the text output
}

// replicaJSON is one replica of the local cluster.
type replicaJSON struct {
	Replica  int    `json:"replica"`
	PID      int    `json:"pid"`
	Address  string `json:"address"`
	DataFile string `json:"data_file"`
	Running  bool   `json:"running"`
}

// Down returns the replicas that are not running.
func (st ServerJSON) Down() []int {
	var down []int
	for _, r := range st.Replicas {
		if !r.Running {
			down = append(down, r.Replica)
		}
	}
	return down
}

// NewCmdTigerBeetle returns the tblimit tigerbeetle noun: up, down, status, and
// the hidden serve that up starts in the background.
func NewCmdTigerBeetle(f *cmdutil.Factory) *cobra.Command {
	cmd := cmdutil.Group(&cobra.Command{
		Use:   "tigerbeetle",
		Short: "Run a local TigerBeetle server or cluster in the background: up, down, status",
		Long: `Run a local TigerBeetle server, or a cluster of several replicas, in the
background, with its data in a per-user directory, so that tblimit can run
against a real server:

  tblimit tigerbeetle up                      # formats the data file once, starts the server
  export TBLIMIT_ADDRESSES=127.0.0.1:3000     # what up prints
  tblimit resources list
  tblimit tigerbeetle down

To try failover by hand, start three replicas, stop or kill one, and bring it
back with up (it restarts on its data file and rejoins the cluster):

  tblimit tigerbeetle up --replicas 3         # ports 3000, 3001, 3002
  tblimit tigerbeetle down --replica 0 --kill # SIGKILL replica 0; 2 of 3 still answer
  tblimit tigerbeetle status                  # every replica, and whether the cluster answers
  tblimit tigerbeetle up                      # restarts replica 0
  tblimit tigerbeetle down                    # stops them all

The tigerbeetle binary is --binary, else $TIGERBEETLE_BIN, else tigerbeetle on
PATH; scripts/install-tigerbeetle.sh installs the release that matches
tblimit's client. A data file takes about 1.1 GB of disk, a replica about
1.5 GB of memory (less with --development, the default).`,
	})
	var dir string
	cmd.PersistentFlags().StringVar(&dir, "dir", "", "the server's directory: data files, log and state (default: the tigerbeetle directory next to the default --data)")
	env := func() serverEnv {
		e := serverEnv{Printer: f.Printer, ErrOut: f.ErrOut, Dir: dir}
		e.set(&f.Global)
		return e
	}
	cmd.AddCommand(newCmdServerUp(env, nil), newCmdServerDown(env, nil), newCmdServerStatus(env, nil), newCmdSupervisor(env, nil))
	return cmd
}

// directory is the server's directory, absolute.
func (e *serverEnv) directory() (string, error) {
	if e.Dir != "" {
		return filepath.Abs(e.Dir)
	}
	home, err := cmdutil.DataHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "tigerbeetle"), nil
}

// readState reads the state file the supervisor wrote; ok is false if there is none. A
// state written before clusters (no replicas) describes replica 0 by its server fields.
func readState(dir string) (ServerJSON, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return ServerJSON{Dir: dir}, false, nil
	}
	if err != nil {
		return ServerJSON{}, false, err
	}
	var st ServerJSON
	if err := json.Unmarshal(b, &st); err != nil {
		return ServerJSON{}, false, fmt.Errorf("%s: %w", filepath.Join(dir, StateFile), err)
	}
	if len(st.Replicas) == 0 && st.ServerPID != 0 {
		r := replicaJSON{PID: st.ServerPID, DataFile: st.DataFile}
		if len(st.Addresses) > 0 {
			r.Address = st.Addresses[0]
		}
		st.Replicas = []replicaJSON{r}
	}
	return st, true, nil
}

// saveState replaces the state file at once.
func saveState(dir string, st ServerJSON) error {
	state := filepath.Join(dir, StateFile)
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(state+".tmp", append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(state+".tmp", state)
}

// alive reports whether a process with this pid exists (and is not a zombie
// of this process).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ours reports whether pid is alive and is a process of the server in dir.
// Where /proc shows command lines (Linux), both the supervisor's (tblimit
// tigerbeetle serve --dir DIR) and the replicas' (tigerbeetle start
// DIR/...tigerbeetle) name dir, which a process that took over the pid of a
// dead one (after a crash or a reboot) does not; elsewhere the pid is trusted.
func ours(pid int, dir string) bool {
	if !alive(pid) {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || dir == "" {
		return true // no /proc, or not allowed to look
	}
	return bytes.Contains(cmdline, []byte(dir)) // a zombie's is empty
}
