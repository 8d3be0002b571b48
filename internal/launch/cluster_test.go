//go:build unix

package launch

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tblimit/tblimit/testenv/fake"
)

// endedBy fails the test unless p ended by signal sig.
func endedBy(t *testing.T, p *Process, sig syscall.Signal) {
	t.Helper()
	ws := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != sig {
		t.Errorf("replica %d ended with %v, want %v", p.Replica, p.Cmd.ProcessState, sig)
	}
}

// listens fails the test unless addr accepts a connection within 5 s: the probe of a fake
// cluster waits for replica 0 only.
func listens(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("dial %s: %v", addr, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestClusterStartStopKillRestart(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	dir := t.TempDir()
	c, err := StartCluster(t.Context(), dir, 3, WithBinary(f.Bin), WithClusterID(9), WithDevelopment(true), WithProbe(fake.DialProbe))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if c.Replicas() != 3 || c.ClusterID != 9 || len(c.Addresses) != 3 {
		t.Fatalf("cluster = %d replicas, cluster %d, addresses %q", c.Replicas(), c.ClusterID, c.Addresses)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(c.Addresses)))) != 3 {
		t.Errorf("Addresses = %q, want three different ones", c.Addresses)
	}
	list := strings.Join(c.Addresses, ",")
	file := func(i int) string { return filepath.Join(dir, DataFileName(9, i)) }
	var wantFormats, wantStarts []string
	for i := range 3 {
		wantFormats = append(wantFormats, "format --cluster=9 --replica="+string(rune('0'+i))+" --replica-count=3 --development "+file(i))
		wantStarts = append(wantStarts, "start --addresses="+list+" --development "+file(i))
	}
	for i := range 3 {
		p := c.Replica(i)
		if p.Replica != i || p.Address != c.Addresses[i] || p.DataFile != file(i) || !slices.Equal(p.Addresses, c.Addresses) {
			t.Errorf("Replica(%d) = replica %d at %s, data %s, addresses %q", i, p.Replica, p.Address, p.DataFile, p.Addresses)
		}
		listens(t, p.Address)
	}

	calls := f.Calls(t)
	formats, starts := slices.Sorted(slices.Values(calls[:3])), slices.Sorted(slices.Values(calls[3:]))
	if !slices.Equal(formats, wantFormats) || !slices.Equal(starts, wantStarts) {
		t.Fatalf("calls =\n%q\nwant formats\n%q\nand starts\n%q", calls, wantFormats, wantStarts)
	}

	// One replica killed and restarted on its data file and address; the others run on.
	killed := c.Replica(1)
	if err := c.KillReplica(1); err != nil {
		t.Fatalf("KillReplica(1) = %v", err)
	}
	endedBy(t, killed, syscall.SIGKILL)
	if c.Replica(0).Exited() || c.Replica(2).Exited() {
		t.Fatal("killing replica 1 ended another")
	}
	if err := c.RestartReplica(t.Context(), 0); err == nil {
		t.Error("RestartReplica(0) of a running replica succeeded")
	}
	if err := c.RestartReplica(t.Context(), 1); err != nil {
		t.Fatalf("RestartReplica(1) = %v", err)
	}
	again := c.Replica(1)
	if again == killed || again.Exited() || again.Address != killed.Address {
		t.Fatalf("after RestartReplica(1): a new process %v, exited %v, at %s (was %s)", again != killed, again.Exited(), again.Address, killed.Address)
	}
	listens(t, again.Address)
	if got := f.Calls(t)[6]; got != wantStarts[1] {
		t.Errorf("restart call = %q, want %q", got, wantStarts[1])
	}

	stopped := c.Replica(0)
	if err := c.StopReplica(0); err != nil {
		t.Fatalf("StopReplica(0) = %v", err)
	}
	endedBy(t, stopped, syscall.SIGTERM)

	// The whole cluster killed, then restarted: replica 0, already down, comes back too.
	before := []*Process{c.Replica(0), c.Replica(1), c.Replica(2)}
	if err := c.Kill(); err != nil {
		t.Fatalf("Kill() = %v", err)
	}
	endedBy(t, before[1], syscall.SIGKILL)
	endedBy(t, before[2], syscall.SIGKILL)
	if err := c.Restart(t.Context()); err != nil {
		t.Fatalf("Restart() = %v", err)
	}
	for i := range 3 {
		if p := c.Replica(i); p == before[i] || p.Exited() {
			t.Errorf("after Restart, replica %d is not a new running process", i)
		}
		listens(t, c.Addresses[i])
	}
	if n := len(f.Calls(t)); n != 10 {
		t.Errorf("%d calls, want 3 formats and 7 starts (none formatted again): %q", n, f.Calls(t))
	}

	running := []*Process{c.Replica(0), c.Replica(1), c.Replica(2)}
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop() = %v", err)
	}
	for _, p := range running {
		endedBy(t, p, syscall.SIGTERM)
	}
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := os.Stat(file(i)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("data file %d after Remove: %v", i, err)
		}
	}
}

// A replica that exits during start-up fails StartCluster at once, and takes the others
// down with it.
func TestClusterReplicaExitFailsFast(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{Mode: fake.ModeExitEarly})
	begin := time.Now()
	_, err := StartCluster(t.Context(), t.TempDir(), 3, WithBinary(f.Bin), WithReadyTimeout(time.Minute))
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "the data file is locked") {
		t.Fatalf("StartCluster = %v, want ErrExited with the replica's output", err)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("StartCluster took %v to notice the exit", d)
	}
	f.WaitAllGone(t, 5*time.Second)
}

// A data file remembers its replica count: a directory holding another cluster's files is
// refused before anything is started.
func TestClusterRefusesOtherDataFiles(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	dir := t.TempDir()
	p, err := Start(t.Context(), dir, WithBinary(f.Bin), WithProbe(fake.DialProbe))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := StartCluster(t.Context(), dir, 3, WithBinary(f.Bin), WithProbe(fake.DialProbe)); err == nil ||
		!strings.Contains(err.Error(), "not those of 3 replica(s)") {
		t.Errorf("StartCluster over a single replica's data file = %v, want a refusal", err)
	}
	other := t.TempDir()
	for _, name := range []string{DataFileName(0, 0), DataFileName(0, 1)} {
		if err := os.WriteFile(filepath.Join(other, name), []byte("0\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Start(t.Context(), other, WithBinary(f.Bin), WithProbe(fake.DialProbe)); err == nil {
		t.Error("Start over a cluster's data files succeeded, want a refusal")
	}
	if got := len(f.Calls(t)); got != 2 {
		t.Errorf("calls = %q, want only the first format and start", f.Calls(t))
	}
}

func TestClusterAddresses(t *testing.T) {
	t.Parallel()
	got, err := clusterAddresses(3000, 3)
	if want := []string{"127.0.0.1:3000", "127.0.0.1:3001", "127.0.0.1:3002"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("clusterAddresses(3000, 3) = %q, %v, want %q", got, err, want)
	}
	got, err = clusterAddresses(0, 5)
	if err != nil || len(slices.Compact(slices.Sorted(slices.Values(got)))) != 5 {
		t.Errorf("clusterAddresses(0, 5) = %q, %v, want five different addresses", got, err)
	}
}

// WithReplicaAddresses starts each replica, and restarts it, with its own address list;
// the cluster's Addresses and each Process's stay the replicas' own.
func TestClusterReplicaAddresses(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	dir := t.TempDir()
	own := func(i int, addresses []string) []string {
		for j := range addresses {
			if j > i {
				addresses[j] = "127.0.0.1:1" // where replica i would dial replica j
			}
		}
		return addresses
	}
	c, err := StartCluster(t.Context(), dir, 2, WithBinary(f.Bin), WithDevelopment(true), WithProbe(fake.DialProbe), WithReplicaAddresses(own))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	file := func(i int) string { return filepath.Join(dir, DataFileName(0, i)) }
	want := []string{
		"start --addresses=" + c.Addresses[0] + ",127.0.0.1:1 --development " + file(0),
		"start --addresses=" + strings.Join(c.Addresses, ",") + " --development " + file(1),
	}
	if got := slices.Sorted(slices.Values(f.Calls(t)[2:])); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("starts = %q, want %q", got, want)
	}
	for i := range 2 {
		if p := c.Replica(i); !slices.Equal(p.Addresses, c.Addresses) || p.Address != c.Addresses[i] {
			t.Errorf("Replica(%d) at %s with addresses %q, want %s of %q", i, p.Address, p.Addresses, c.Addresses[i], c.Addresses)
		}
	}
	if err := c.KillReplica(0); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartReplica(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if got := f.Calls(t)[4]; got != want[0] {
		t.Errorf("restart = %q, want %q", got, want[0])
	}
	bad := func(i int, addresses []string) []string { return addresses[:1] }
	if _, err := StartCluster(t.Context(), t.TempDir(), 2, WithBinary(f.Bin), WithDevelopment(true), WithProbe(fake.DialProbe), WithReplicaAddresses(bad)); err == nil {
		t.Error("StartCluster with a short address list for a replica succeeded")
	}
}
