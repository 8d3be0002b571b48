package tigerbeetle

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/internal/launch"
)

// supervisorOptions are those of the hidden tigerbeetle serve, the
// supervisor: it runs the server or cluster in the foreground and supervises
// it (up starts it in the background). They are named for what the command
// does, not "serve": tblimit serve, the rate limit service, is package
// serve, with serveOptions.
type supervisorOptions struct {
	serverEnv
	launchSpec
	ReadyFD int // where to report readiness, as one JSON line; 0: nowhere
}

func newCmdSupervisor(env func() serverEnv, runF func(context.Context, *supervisorOptions) error) *cobra.Command {
	opts := &supervisorOptions{}
	cmd := &cobra.Command{
		Use:    "serve",
		Short:  "Run the server or cluster in the foreground and supervise it (what up starts)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.check(); err != nil {
				return err
			}
			opts.serverEnv = env()
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return supervisorRun(cmd.Context(), opts)
		},
	}
	opts.bind(cmd.Flags(), false)
	cmd.Flags().IntVar(&opts.ReadyFD, "ready-fd", 0, "a file descriptor to report readiness on, as one JSON line")
	return cmd
}

// LaunchOptions come after the supervisor's own launch options; the end-to-end
// tests add a readiness probe that accepts their fake tigerbeetle.
var LaunchOptions []launch.Option

// supervised is what serve runs: a single server or a cluster.
type supervised struct {
	single  *launch.Process
	cluster *launch.Cluster
}

func (s supervised) replicas() int {
	if s.cluster != nil {
		return s.cluster.Replicas()
	}
	return 1
}

func (s supervised) replica(i int) *launch.Process {
	if s.cluster != nil {
		return s.cluster.Replica(i)
	}
	return s.single
}

func (s supervised) stop() error {
	if s.cluster != nil {
		return s.cluster.Stop()
	}
	return s.single.Stop()
}

// supervisorRun launches the server or cluster, reports on the ready descriptor and supervises it
// until it is told to stop (SIGTERM, SIGINT). A single server that dies ends serve; a
// replica of a cluster that dies (stopped or killed by hand, or crashed) is recorded as
// down, and SIGHUP restarts the replicas that are down.
func supervisorRun(ctx context.Context, o *supervisorOptions) error {
	dir, err := o.directory()
	if err != nil {
		return err
	}
	report := func(v any) {
		if o.ReadyFD <= 0 {
			return
		}
		f := os.NewFile(uintptr(o.ReadyFD), "ready")
		_ = json.NewEncoder(f).Encode(v)
		f.Close()
	}
	// Catch SIGHUP before anything is started: up may send it as soon as the state exists.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	s, err := o.launch(ctx, dir)
	if err != nil {
		report(map[string]string{"error": err.Error()})
		return err
	}
	st := o.state(dir, s, true)
	st.Started = time.Now().UTC().Format(time.RFC3339)
	if err := saveState(dir, st); err != nil {
		_ = s.stop()
		report(map[string]string{"error": err.Error()})
		return err
	}
	report(st)
	fmt.Fprintf(o.ErrOut, "tblimit: tigerbeetle running at %s (pid %d)\n", strings.Join(st.Addresses, ","), st.ServerPID)
	err = o.supervise(ctx, dir, s, st, hup)
	_ = os.Remove(filepath.Join(dir, StateFile))
	return err
}

func (o *supervisorOptions) launch(ctx context.Context, dir string) (supervised, error) {
	opts := append([]launch.Option{
		launch.WithBinary(o.Binary),
		launch.WithPort(o.Port),
		launch.WithClusterID(o.ClusterID),
		launch.WithDevelopment(o.Development),
		launch.WithPipelineRequests(o.PipelineRequests),
		launch.WithStderr(o.ErrOut),
	}, LaunchOptions...)
	if o.Replicas == 1 {
		p, err := launch.Start(ctx, dir, opts...)
		return supervised{single: p}, err
	}
	c, err := launch.StartCluster(ctx, dir, o.Replicas, opts...)
	return supervised{cluster: c}, err
}

// state describes s as the state file records it.
func (o *supervisorOptions) state(dir string, s supervised, answering bool) ServerJSON {
	first := s.replica(0)
	st := ServerJSON{
		Running:           true,
		Answering:         answering,
		PID:               os.Getpid(),
		ServerPID:         first.Cmd.Process.Pid,
		Addresses:         first.Addresses,
		ClusterID:         first.ClusterID,
		Dir:               dir,
		DataFile:          first.DataFile,
		LogFile:           filepath.Join(dir, LogFile),
		Development:       o.Development,
		ClientConnections: launch.ClientConnections(o.Development, o.PipelineRequests),
	}
	for i := range s.replicas() {
		p := s.replica(i)
		st.Replicas = append(st.Replicas, replicaJSON{
			Replica: i, PID: p.Cmd.Process.Pid, Address: p.Address, DataFile: p.DataFile, Running: !p.Exited(),
		})
	}
	return st
}

// supervise waits for the end: ctx done (stop everything), or the single server's exit. It
// records the exits of a cluster's replicas and restarts them on SIGHUP.
func (o *supervisorOptions) supervise(ctx context.Context, dir string, s supervised, st ServerJSON, hup <-chan os.Signal) error {
	exited := make(chan *launch.Process, s.replicas())
	watch := func(p *launch.Process) {
		go func() {
			<-p.Done()
			exited <- p
		}()
	}
	for i := range s.replicas() {
		watch(s.replica(i))
	}
	for {
		select {
		case <-ctx.Done():
			err := s.stop()
			if s.cluster != nil {
				err = nil // replicas stopped or killed by hand are not the supervisor's failure
			}
			fmt.Fprintln(o.ErrOut, "tblimit: tigerbeetle stopped")
			return err
		case p := <-exited:
			if p.Stopped() {
				continue // a restart replaced it, or serve is stopping
			}
			if s.cluster == nil {
				return fmt.Errorf("tigerbeetle exited by itself: %v", p.Wait())
			}
			fmt.Fprintf(o.ErrOut, "tblimit: replica %d (pid %d) exited: %v; tblimit tigerbeetle up restarts it\n",
				p.Replica, p.Cmd.Process.Pid, p.Wait())
			st.Replicas[p.Replica].Running = false
			_ = saveState(dir, st)
		case <-hup:
			if s.cluster == nil {
				continue
			}
			before := make([]*launch.Process, s.replicas())
			for i := range before {
				before[i] = s.replica(i)
			}
			// Bounded by the ready timeout; not by ctx, so that a stop during a restart
			// still finds every replica recorded.
			err := s.cluster.Restart(context.Background())
			if err != nil {
				fmt.Fprintf(o.ErrOut, "tblimit: restarting replicas: %s\n", cmdutil.Message(err))
			}
			for i, p := range before {
				if now := s.replica(i); now != p {
					watch(now)
					fmt.Fprintf(o.ErrOut, "tblimit: replica %d restarted (pid %d)\n", i, now.Cmd.Process.Pid)
				}
			}
			started := st.Started
			st = o.state(dir, s, err == nil)
			st.Started = started
			if err := saveState(dir, st); err != nil {
				fmt.Fprintf(o.ErrOut, "tblimit: %s\n", cmdutil.Message(err))
			}
		}
	}
}
