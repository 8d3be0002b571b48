package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// MaxReplicas is the largest replica count tigerbeetle accepts (its replicas_max).
const MaxReplicas = 6

// Cluster is a local multi-replica TigerBeetle cluster started by StartCluster: one
// `tigerbeetle start` per replica, all on loopback. Replicas can be stopped, killed and
// restarted one at a time, or all together; a replica restarted on its data file rejoins
// the cluster. Its methods are safe for concurrent use; its fields are read-only.
//
// A cluster of n replicas answers while a majority of them runs (2 of 3), and a client given
// every address finds the primary by itself.
type Cluster struct {
	// Addresses is what tb.NewClient needs: every replica's loopback host:port, in replica
	// order.
	Addresses []string
	// ClusterID is the cluster ID the data files were formatted with.
	ClusterID uint64

	bin string
	cfg config

	mu       sync.Mutex
	replicas []*Process // the latest process of each replica, maybe exited
}

// StartCluster formats the data files of a cluster of n replicas in dir (unless all of
// them exist already), starts every replica with the full address list and returns once a
// client of the cluster got an answer. The replicas listen on free loopback ports chosen
// before they start, or on port, port+1, ... with WithPort. Like Start, it fails fast when a
// replica exits during start-up, never waits longer than the ready timeout nor after ctx is
// done, and the replicas die with the launching process on Linux. Each data file takes
// about 1.1 GB, each replica about 1.5 GB of memory (much less with --development).
func StartCluster(ctx context.Context, dir string, n int, opts ...Option) (*Cluster, error) {
	cfg := newConfig(opts)
	bin, err := FindBinary(cfg.binary)
	if err != nil {
		return nil, err
	}
	if n < 1 || n > MaxReplicas {
		return nil, fmt.Errorf("launch: %d replicas: want 1 to %d", n, MaxReplicas)
	}
	if cfg.port < 0 || cfg.port+n-1 > 65535 {
		return nil, fmt.Errorf("launch: ports %d..%d out of range 0..65535", cfg.port, cfg.port+n-1)
	}
	ctx, cancel := readyContext(ctx, cfg)
	defer cancel()
	files, err := prepareDir(ctx, bin, cfg, dir, n)
	if err != nil {
		return nil, err
	}
	addresses, err := clusterAddresses(cfg.port, n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Addresses: addresses, ClusterID: cfg.clusterID, bin: bin, cfg: cfg, replicas: make([]*Process, n)}
	for i := range n {
		p, err := c.spawn(files[i], i)
		if err != nil {
			_ = c.Kill()
			return nil, err
		}
		c.replicas[i] = p
	}
	if err := probe(ctx, cfg, c.replicas); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// clusterAddresses returns the loopback addresses of n replicas: from port on, or free
// ports if port is 0. A free port is found by listening on port 0 and closing the listener:
// another process may take it before the replica listens, in which case that replica exits
// during start-up and StartCluster reports it.
func clusterAddresses(port, n int) ([]string, error) {
	addresses := make([]string, n)
	if port != 0 {
		for i := range addresses {
			addresses[i] = loopback(port + i)
		}
		return addresses, nil
	}
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := range addresses {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("launch: finding a free port: %w", err)
		}
		lns = append(lns, ln) // held until all are chosen, so that they differ
		addresses[i] = ln.Addr().String()
	}
	return addresses, nil
}

// Replicas returns the number of replicas.
func (c *Cluster) Replicas() int { return len(c.replicas) }

// Replica returns the latest process of replica i, which may have exited.
func (c *Cluster) Replica(i int) *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replicas[i]
}

// StopReplica stops replica i as Process.Stop does (SIGTERM, then SIGKILL after the stop
// timeout). The others keep running.
func (c *Cluster) StopReplica(i int) error { return c.Replica(i).Stop() }

// KillReplica kills replica i with SIGKILL, as a crash would. The others keep running.
func (c *Cluster) KillReplica(i int) error { return c.Replica(i).Kill() }

// RestartReplica starts replica i again on its data file and address, and returns once it
// listens (it then rejoins the cluster by itself), or fails if it exits first, if ctx is done
// or after the ready timeout. The replica must have exited: stopped, killed, or crashed.
func (c *Cluster) RestartReplica(ctx context.Context, i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restart(ctx, i)
}

// restart requires that c.mu is held.
func (c *Cluster) restart(ctx context.Context, i int) error {
	old := c.replicas[i]
	if !old.Exited() {
		return fmt.Errorf("launch: replica %d (pid %d) is still running", i, old.Cmd.Process.Pid)
	}
	_ = old.Stop() // marks the exit as expected; an earlier failure is the caller's to see in old
	p, err := c.spawn(old.DataFile, i)
	if err != nil {
		return err
	}
	c.replicas[i] = p
	ctx, cancel := readyContext(ctx, c.cfg)
	defer cancel()
	return p.listening(ctx)
}

// spawn starts replica i on dataFile with its address list (see WithReplicaAddresses).
func (c *Cluster) spawn(dataFile string, i int) (*Process, error) {
	list := c.Addresses
	if c.cfg.peers != nil {
		list = c.cfg.peers(i, append([]string(nil), c.Addresses...))
		if len(list) != len(c.Addresses) || list[i] != c.Addresses[i] {
			return nil, fmt.Errorf("launch: replica %d given addresses %v: want %d, entry %d %s", i, list, len(c.Addresses), i, c.Addresses[i])
		}
	}
	p, err := spawn(c.bin, c.cfg, dataFile, i, strings.Join(list, ","))
	if err != nil {
		return nil, err
	}
	p.Addresses = c.Addresses // what a client needs, whatever the replica dials
	return p, nil
}

// listening waits until the process accepts TCP connections on its address.
func (p *Process) listening(ctx context.Context) error {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", p.Address)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-p.child.done:
			return p.exitedError()
		case <-ctx.Done():
			return p.notReadyError(ctx, "did not listen on "+p.Address)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Restart starts every replica that has exited, on its data file and address, and returns
// once the cluster answers: what a cluster killed as a whole needs.
func (c *Cluster) Restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := readyContext(ctx, c.cfg)
	defer cancel()
	for i, p := range c.replicas {
		if p.Exited() {
			if err := c.restart(ctx, i); err != nil {
				return err
			}
		}
	}
	return probe(ctx, c.cfg, c.replicas)
}

// Stop stops every replica that runs, all at once, as Process.Stop does. It returns the
// errors of their Stops (a replica that had crashed, or needed SIGKILL).
func (c *Cluster) Stop() error { return c.each(func(p *Process) error { return p.Stop() }) }

// Kill kills every replica at once with SIGKILL, as a power cut would. Restart starts them
// again.
func (c *Cluster) Kill() error { return c.each(func(p *Process) error { return p.Kill() }) }

// Remove deletes the data files. Call it after Stop.
func (c *Cluster) Remove() error {
	return c.each(func(p *Process) error { return removeFile(p.DataFile) })
}

func (c *Cluster) each(f func(*Process) error) error {
	c.mu.Lock()
	ps := append([]*Process(nil), c.replicas...)
	c.mu.Unlock()
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		if p != nil {
			wg.Go(func() { errs[i] = f(p) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
