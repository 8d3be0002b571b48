//go:build unix

package launch

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tblimit/tblimit/testenv/fake"
)

func TestLaunchFormatsStartsAndStops(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	dir := filepath.Join(t.TempDir(), "data") // created by Launch
	p, err := Start(t.Context(), dir, WithBinary(f.Bin), WithClusterID(7), WithDevelopment(true), WithProbe(fake.DialProbe))
	if err != nil {
		t.Fatal(err)
	}
	dataFile := filepath.Join(dir, "7_0.tigerbeetle")
	if p.DataFile != dataFile || p.ClusterID != 7 {
		t.Errorf("DataFile, ClusterID = %q, %d, want %q, 7", p.DataFile, p.ClusterID, dataFile)
	}
	want := []string{
		"format --cluster=7 --replica=0 --replica-count=1 --development " + dataFile,
		"start --addresses=0 --development " + dataFile,
	}
	if got := f.Calls(t); !slices.Equal(got, want) {
		t.Errorf("calls =\n%q\nwant\n%q", got, want)
	}
	// The address is the port the server printed, on loopback.
	if len(p.Addresses) != 1 || !strings.HasPrefix(p.Addresses[0], "127.0.0.1:") {
		t.Fatalf("Addresses = %q, want [127.0.0.1:PORT]", p.Addresses)
	}
	// The server's stderr and stdout come through separate pipes, each copied by its own
	// goroutine: the port can arrive before the line logged ahead of it.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.Stderr(), "listening on "+p.Addresses[0]); {
		if time.Now().After(deadline) {
			t.Errorf("Stderr() = %q after 10 s, want the server's listening line", p.Stderr())
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The server keeps running: with --addresses=0 it would exit if its stdin were closed.
	time.Sleep(100 * time.Millisecond)
	if fake.Gone(p.Cmd.Process.Pid) {
		t.Fatal("server exited by itself")
	}

	if err := p.Stop(); err != nil {
		t.Fatalf("Stop() = %v", err)
	}
	ws := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("server ended with %v, want SIGTERM", p.Cmd.ProcessState)
	}
	if !fake.Gone(p.Cmd.Process.Pid) {
		t.Error("server still running after Stop")
	}
	if c, err := net.Dial("tcp", p.Addresses[0]); err == nil {
		c.Close()
		t.Error("port still accepts connections after Stop")
	}
	if err := p.Stop(); err != nil {
		t.Errorf("second Stop() = %v, want nil", err)
	}
	if err := p.Wait(); err == nil {
		t.Error("Wait() = nil, want the SIGTERM exit")
	}
	if _, err := os.Stat(dataFile); err != nil {
		t.Fatalf("data file gone before Remove: %v", err)
	}
	if err := p.Remove(); err != nil {
		t.Fatalf("Remove() = %v", err)
	}
	if _, err := os.Stat(dataFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data file still there after Remove: %v", err)
	}
	if err := p.Remove(); err != nil {
		t.Errorf("second Remove() = %v, want nil", err)
	}
	if !p.Stopped() || !p.Exited() {
		t.Errorf("Stopped(), Exited() = %v, %v after Stop, want true, true", p.Stopped(), p.Exited())
	}
}

func TestLaunchReusesDataFile(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	dir := t.TempDir()
	for range 2 {
		p, err := Start(t.Context(), dir, WithBinary(f.Bin), WithProbe(fake.DialProbe))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	dataFile := filepath.Join(dir, "0_0.tigerbeetle")
	want := []string{
		"format --cluster=0 --replica=0 --replica-count=1 " + dataFile,
		"start --addresses=0 " + dataFile,
		"start --addresses=0 " + dataFile,
	}
	if got := f.Calls(t); !slices.Equal(got, want) {
		t.Errorf("calls =\n%q\nwant\n%q", got, want)
	}
}

func TestLaunchFixedPort(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	p, err := Start(t.Context(), dir, WithBinary(f.Bin), WithPort(port), WithProbe(fake.DialProbe))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if !slices.Equal(p.Addresses, []string{addr}) {
		t.Errorf("Addresses = %q, want [%s]", p.Addresses, addr)
	}
	if got, want := f.Calls(t)[1], "start --addresses="+addr+" "+filepath.Join(dir, "0_0.tigerbeetle"); got != want {
		t.Errorf("start call = %q, want %q", got, want)
	}
}

func TestLaunchEarlyExitFailsFast(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{Mode: fake.ModeExitEarly})
	begin := time.Now()
	_, err := Start(t.Context(), t.TempDir(), WithBinary(f.Bin), WithReadyTimeout(time.Minute))
	if err == nil {
		t.Fatal("Launch succeeded, want an error")
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("Launch took %v to notice the exit", d)
	}
	if !errors.Is(err, ErrExited) {
		t.Errorf("error %v is not ErrExited", err)
	}
	for _, want := range []string{"the data file is locked by another process", "exit status 1", "start --addresses=0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestLaunchFormatFailure(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{FormatFails: true})
	dir := t.TempDir()
	_, err := Start(t.Context(), dir, WithBinary(f.Bin), WithProbe(fake.DialProbe))
	if err == nil || !strings.Contains(err.Error(), "cannot allocate data file") {
		t.Fatalf("Launch() = %v, want the format output", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "0_0.tigerbeetle")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("partial data file left: %v", err)
	}
	if calls := f.Calls(t); len(calls) != 1 {
		t.Errorf("calls = %q, want format only", calls)
	}
}

func TestLaunchReadyTimeout(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{fake.ModeHang, fake.ModeBadPort} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			f := fake.New(t, fake.Options{Mode: mode})
			// The hang must end at the deadline; a bad port is refused as
			// soon as it is printed, which a loaded machine may take more
			// than a moment to do: its deadline leaves room for that.
			timeout := 500 * time.Millisecond
			if mode == fake.ModeBadPort {
				timeout = 30 * time.Second
			}
			begin := time.Now()
			_, err := Start(t.Context(), t.TempDir(), WithBinary(f.Bin), WithReadyTimeout(timeout), WithProbe(fake.DialProbe))
			if err == nil {
				t.Fatal("Launch succeeded, want an error")
			}
			if d := time.Since(begin); d > timeout+5*time.Second {
				t.Errorf("Launch took %v with a %v ReadyTimeout", d, timeout)
			}
			switch mode {
			case fake.ModeHang:
				if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "printed no port") {
					t.Errorf("error = %v, want a deadline that says no port was printed", err)
				}
			case fake.ModeBadPort:
				if !strings.Contains(err.Error(), `printed "hello" on stdout`) {
					t.Errorf("error = %v, want it to quote what was printed", err)
				}
			}
			f.WaitAllGone(t, 5*time.Second)
		})
	}
}

// A server that accepts connections and never answers is what a client sees from a server
// of another cluster: the real client waits for ever, Launch must not.
func TestLaunchNopProbeNeverHangs(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	begin := time.Now()
	_, err := Start(t.Context(), t.TempDir(), WithBinary(f.Bin), WithClusterID(3), WithReadyTimeout(2*time.Second))
	if err == nil {
		t.Fatal("Launch succeeded against a server that never answers")
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("Launch took %v with a 2s ReadyTimeout", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "another cluster than 3") {
		t.Errorf("error = %v, want a deadline that mentions the cluster ID", err)
	}
	f.WaitAllGone(t, 5*time.Second)
}

func TestLaunchContextCanceled(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	begin := time.Now()
	_, err := Start(ctx, t.TempDir(), WithBinary(f.Bin))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Launch() = %v, want context.Canceled", err)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("Launch took %v to notice the cancellation", d)
	}
	f.WaitAllGone(t, 5*time.Second)
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{Mode: fake.ModeIgnoreTerm})
	p, err := Start(t.Context(), t.TempDir(), WithBinary(f.Bin), WithStopTimeout(300*time.Millisecond), WithProbe(fake.DialProbe))
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	err = p.Stop()
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Stop() = %v, want an error saying it was killed", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("Stop took %v", d)
	}
	ws := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("server ended with %v, want SIGKILL", p.Cmd.ProcessState)
	}
}

func TestStopAfterCrashReportsIt(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	p, err := Start(t.Context(), t.TempDir(), WithBinary(f.Bin), WithProbe(fake.DialProbe))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.Wait()
	if err := p.Stop(); err == nil || !strings.Contains(err.Error(), "had exited before Stop") {
		t.Errorf("Stop() = %v, want it to report the earlier exit", err)
	}
}

func TestLaunchValidatesConfig(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	for _, c := range []struct {
		dir  string
		opts []Option
	}{
		{"", []Option{WithBinary(f.Bin)}},
		{t.TempDir(), []Option{WithBinary(f.Bin), WithPort(-1)}},
		{t.TempDir(), []Option{WithBinary(f.Bin), WithPort(65536)}},
		{t.TempDir(), []Option{WithBinary(filepath.Join(t.TempDir(), "missing"))}},
	} {
		if _, err := Start(t.Context(), c.dir, c.opts...); err == nil {
			t.Errorf("Start(%q, %d options) succeeded, want an error", c.dir, len(c.opts))
		}
	}
	for _, n := range []int{0, MaxReplicas + 1} {
		if _, err := StartCluster(t.Context(), t.TempDir(), n, WithBinary(f.Bin)); err == nil {
			t.Errorf("StartCluster(%d replicas) succeeded, want an error", n)
		}
	}
	if _, err := StartCluster(t.Context(), t.TempDir(), 3, WithBinary(f.Bin), WithPort(65534)); err == nil {
		t.Error("StartCluster(3 replicas from port 65534) succeeded, want an error")
	}
	if calls := f.Calls(t); len(calls) != 0 {
		t.Errorf("calls = %q, want none", calls)
	}
}
