//go:build unix

package testenv

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
)

func TestLaunchFormatsStartsAndStops(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOpts{})
	dir := filepath.Join(t.TempDir(), "data") // created by Launch
	p, err := launch(t.Context(), Config{Binary: f.bin, Dir: dir, ClusterID: 7, Development: true}, dialProbe)
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
	if got := f.calls(t); !slices.Equal(got, want) {
		t.Errorf("calls =\n%q\nwant\n%q", got, want)
	}
	// The address is the port the server printed, on loopback.
	if len(p.Addresses) != 1 || !strings.HasPrefix(p.Addresses[0], "127.0.0.1:") {
		t.Fatalf("Addresses = %q, want [127.0.0.1:PORT]", p.Addresses)
	}
	if !strings.Contains(p.Stderr(), "listening on "+p.Addresses[0]) {
		t.Errorf("Stderr() = %q, want the server's listening line", p.Stderr())
	}
	// The server keeps running: with --addresses=0 it would exit if its stdin were closed.
	time.Sleep(100 * time.Millisecond)
	if gone(p.Cmd.Process.Pid) {
		t.Fatal("server exited by itself")
	}

	if err := p.Stop(); err != nil {
		t.Fatalf("Stop() = %v", err)
	}
	ws := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("server ended with %v, want SIGTERM", p.Cmd.ProcessState)
	}
	if !gone(p.Cmd.Process.Pid) {
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
	if slices.Contains(liveProcesses(), p) {
		t.Error("stopped process still registered")
	}
}

func TestLaunchReusesDataFile(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOpts{})
	dir := t.TempDir()
	for range 2 {
		p, err := launch(t.Context(), Config{Binary: f.bin, Dir: dir}, dialProbe)
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
	if got := f.calls(t); !slices.Equal(got, want) {
		t.Errorf("calls =\n%q\nwant\n%q", got, want)
	}
}

func TestLaunchFixedPort(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOpts{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	p, err := launch(t.Context(), Config{Binary: f.bin, Dir: dir, Port: port}, dialProbe)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if !slices.Equal(p.Addresses, []string{addr}) {
		t.Errorf("Addresses = %q, want [%s]", p.Addresses, addr)
	}
	if got, want := f.calls(t)[1], "start --addresses="+addr+" "+filepath.Join(dir, "0_0.tigerbeetle"); got != want {
		t.Errorf("start call = %q, want %q", got, want)
	}
}

func TestLaunchEarlyExitFailsFast(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOpts{mode: fakeExitEarly})
	begin := time.Now()
	_, err := launch(t.Context(), Config{Binary: f.bin, Dir: t.TempDir(), ReadyTimeout: time.Minute}, nopProbe)
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
	f := newFake(t, fakeOpts{formatFails: true})
	dir := t.TempDir()
	_, err := launch(t.Context(), Config{Binary: f.bin, Dir: dir}, dialProbe)
	if err == nil || !strings.Contains(err.Error(), "cannot allocate data file") {
		t.Fatalf("Launch() = %v, want the format output", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "0_0.tigerbeetle")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("partial data file left: %v", err)
	}
	if calls := f.calls(t); len(calls) != 1 {
		t.Errorf("calls = %q, want format only", calls)
	}
}

func TestLaunchReadyTimeout(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{fakeHang, fakeBadPort} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, fakeOpts{mode: mode})
			begin := time.Now()
			_, err := launch(t.Context(), Config{Binary: f.bin, Dir: t.TempDir(), ReadyTimeout: 500 * time.Millisecond}, dialProbe)
			if err == nil {
				t.Fatal("Launch succeeded, want an error")
			}
			if d := time.Since(begin); d > 5*time.Second {
				t.Errorf("Launch took %v with a 500ms ReadyTimeout", d)
			}
			switch mode {
			case fakeHang:
				if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "printed no port") {
					t.Errorf("error = %v, want a deadline that says no port was printed", err)
				}
			case fakeBadPort:
				if !strings.Contains(err.Error(), `printed "hello" on stdout`) {
					t.Errorf("error = %v, want it to quote what was printed", err)
				}
			}
			for _, pid := range f.pids(t) {
				waitGone(t, pid, 5*time.Second)
			}
		})
	}
}

// A server that accepts connections and never answers is what a client sees from a server
// of another cluster: the real client waits for ever, Launch must not.
func TestLaunchNopProbeNeverHangs(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOpts{})
	begin := time.Now()
	_, err := launch(t.Context(), Config{Binary: f.bin, Dir: t.TempDir(), ClusterID: 3, ReadyTimeout: 2 * time.Second}, nopProbe)
	if err == nil {
		t.Fatal("Launch succeeded against a server that never answers")
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("Launch took %v with a 2s ReadyTimeout", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "another cluster than 3") {
		t.Errorf("error = %v, want a deadline that mentions the cluster ID", err)
	}
	for _, pid := range f.pids(t) {
		waitGone(t, pid, 5*time.Second)
	}
}

func TestLaunchContextCanceled(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOpts{})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	begin := time.Now()
	_, err := launch(ctx, Config{Binary: f.bin, Dir: t.TempDir()}, nopProbe)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Launch() = %v, want context.Canceled", err)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("Launch took %v to notice the cancellation", d)
	}
	for _, pid := range f.pids(t) {
		waitGone(t, pid, 5*time.Second)
	}
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOpts{mode: fakeIgnoreTerm})
	p, err := launch(t.Context(), Config{Binary: f.bin, Dir: t.TempDir(), StopTimeout: 300 * time.Millisecond}, dialProbe)
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
	f := newFake(t, fakeOpts{})
	p, err := launch(t.Context(), Config{Binary: f.bin, Dir: t.TempDir()}, dialProbe)
	if err != nil {
		t.Fatal(err)
	}
	p.stopping.Store(true) // keep reportUnexpectedExit quiet if one were running
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
	f := newFake(t, fakeOpts{})
	for _, cfg := range []Config{
		{Binary: f.bin},
		{Binary: f.bin, Dir: t.TempDir(), Port: -1},
		{Binary: f.bin, Dir: t.TempDir(), Port: 65536},
		{Binary: filepath.Join(t.TempDir(), "missing"), Dir: t.TempDir()},
	} {
		if _, err := Launch(t.Context(), cfg); err == nil {
			t.Errorf("Launch(%+v) succeeded, want an error", cfg)
		}
	}
	if calls := f.calls(t); len(calls) != 0 {
		t.Errorf("calls = %q, want none", calls)
	}
}
