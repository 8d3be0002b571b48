//go:build unix

package testenv

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tblimit/tblimit/internal/launch"
	"github.com/tblimit/tblimit/testenv/fake"
)

func TestStartStopsAndRemovesOnCleanup(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	var srv *Server
	t.Run("user", func(t *testing.T) {
		srv = Start(t, launch.WithBinary(f.Bin), launch.WithClusterID(5), launch.WithProbe(fake.DialProbe))
		if srv.ClusterID != 5 || len(srv.Addresses) != 1 {
			t.Errorf("Server = %+v", srv)
		}
		if !strings.Contains(f.Calls(t)[0], "--development") {
			t.Errorf("format call %q lacks --development", f.Calls(t)[0])
		}
		if _, err := os.Stat(srv.Process().DataFile); err != nil {
			t.Error(err)
		}
	})
	p := srv.Process()
	if !fake.Gone(p.Cmd.Process.Pid) {
		t.Error("server still running after the test that started it ended")
	}
	if _, err := os.Stat(p.DataFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data file still there after the test ended: %v", err)
	}
}

func TestStartSkipsWithoutBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(launch.EnvBinary, "")
	before := skipped.Load()
	c := &captureTB{TB: t}
	c.run(func(tb testing.TB) { Start(tb) })
	want, count := skipNoBinary, int64(1)
	if testing.Short() {
		want, count = skipShort, 0 // -short skips first: it needs no binary to decide
	}
	if c.skipped != want {
		t.Errorf("Start skipped with %q, want %q", c.skipped, want)
	}
	if strings.Contains(c.skipped, "\n") {
		t.Errorf("skip message %q is not one line", c.skipped)
	}
	if got := skipped.Load() - before; got != count {
		t.Errorf("skip count grew by %d, want %d", got, count)
	}
}

func TestStartFailsWithServerOutput(t *testing.T) {
	f := fake.New(t, fake.Options{Mode: fake.ModeExitEarly})
	c := &captureTB{TB: t}
	c.run(func(tb testing.TB) { Start(tb, launch.WithBinary(f.Bin)) })
	if !strings.Contains(c.failed, "the data file is locked by another process") {
		t.Errorf("Start failed with %q, want the server's stderr", c.failed)
	}
}

func TestStartFailsOnUnusableBinary(t *testing.T) {
	c := &captureTB{TB: t}
	c.run(func(tb testing.TB) { Start(tb, launch.WithBinary(filepath.Join(t.TempDir(), "missing"))) })
	if c.failed == "" || c.skipped != "" {
		t.Errorf("Start with a missing binary: failed %q, skipped %q; want a failure", c.failed, c.skipped)
	}
}

// Scenarios run by TestHelperProcess in a child test binary.
const (
	envScenario = "TESTENV_SCENARIO"
	envOut      = "TESTENV_OUT" // the child writes "pid N", "data F", "dir D", "ready" lines here
)

// TestHelperProcess is not a test: other tests run it in a child test binary.
func TestHelperProcess(t *testing.T) {
	scenario := os.Getenv(envScenario)
	if scenario == "" {
		t.Skip("helper for the tests that need a test binary to die")
	}
	out := func(line string) {
		f, err := os.OpenFile(os.Getenv(envOut), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	report := func(s *Server) {
		p := s.Process()
		out("pid " + strconv.Itoa(p.Cmd.Process.Pid))
		out("data " + p.DataFile)
		out("dir " + filepath.Dir(p.DataFile))
	}
	switch scenario {
	case "start-panic":
		report(Start(t))
		panic("scenario panics")
	case "shared-killed":
		report(Shared(t))
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case "shared-interrupted":
		report(Shared(t))
		out("ready")
		time.Sleep(time.Minute)
	case "skips":
		for range 2 {
			t.Run("start", func(t *testing.T) { Start(t) })
		}
		t.Run("shared", func(t *testing.T) { Shared(t) })
	default:
		t.Fatalf("unknown scenario %q", scenario)
	}
}

type childResult struct {
	out    map[string]string // from the child's TESTENV_OUT lines
	output string            // stdout and stderr
	state  *os.ProcessState
}

// runChild runs TestHelperProcess in a new test binary, with fake tigerbeetle f and the
// given extra environment. It returns once the child exited; if wait is false, onReady is
// called when the child reports "ready".
func runChild(t *testing.T, scenario string, env []string, onReady func(*os.Process)) childResult {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(self, "-test.run=^TestHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envScenario+"="+scenario, envOut+"="+outFile, envDialProbe+"=1")
	cmd.Env = append(cmd.Env, env...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if onReady != nil {
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(readFile(outFile), "ready\n") {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("child never got ready; output:\n%s", output.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		onReady(cmd.Process)
	}
	_ = cmd.Wait()
	res := childResult{out: map[string]string{}, output: output.String(), state: cmd.ProcessState}
	for _, line := range strings.Split(readFile(outFile), "\n") {
		k, v, _ := strings.Cut(line, " ")
		res.out[k] = v
	}
	return res
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func (r childResult) serverPid(t *testing.T) int {
	t.Helper()
	pid, err := strconv.Atoi(r.out["pid"])
	if err != nil {
		t.Fatalf("child reported no server pid; output:\n%s", r.output)
	}
	return pid
}

func TestStartCleansUpWhenTestPanics(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	r := runChild(t, "start-panic", []string{launch.EnvBinary + "=" + f.Bin}, nil)
	if r.state.Success() || !strings.Contains(r.output, "scenario panics") {
		t.Fatalf("child ended with %v, want the panic; output:\n%s", r.state, r.output)
	}
	fake.WaitGone(t, r.serverPid(t), 5*time.Second)
	if _, err := os.Stat(r.out["data"]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data file %s left after the panic: %v", r.out["data"], err)
	}
}

func TestSharedServerDiesWithKilledTestBinary(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	tmp := t.TempDir()
	r := runChild(t, "shared-killed", []string{launch.EnvBinary + "=" + f.Bin, "TMPDIR=" + tmp}, nil)
	if ws := r.state.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL; output:\n%s", r.state, r.output)
	}
	// Pdeathsig on Linux; elsewhere the server reads end of file on stdin.
	fake.WaitGone(t, r.serverPid(t), 5*time.Second)

	dir := r.out["dir"]
	if !strings.HasPrefix(dir, filepath.Join(tmp, sharedDirPrefix)) {
		t.Fatalf("shared dir %q is not in $TMPDIR %s", dir, tmp)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("shared dir of the killed binary: %v (expected it left behind)", err)
	}
	// The next test binary's Main sweeps it.
	sweepStale(tmp)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sweepStale left %s: %v", dir, err)
	}
}

func TestSweepStaleKeepsLiveOwners(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	mk := func(name, owner string) string {
		dir := filepath.Join(tmp, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	self := mk(sharedDirPrefix+"self", strconv.Itoa(os.Getpid()))
	parent := mk(sharedDirPrefix+"parent", strconv.Itoa(os.Getppid())+"\n")
	noOwner := mk(sharedDirPrefix+"new", "")
	other := mk("someone-else", "999999999")
	for _, dir := range []string{self, parent, noOwner, other} {
		sweepStale(tmp)
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("sweepStale removed %s: %v", dir, err)
		}
	}
}

func TestMainStopsServersOnInterrupt(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	tmp := t.TempDir()
	r := runChild(t, "shared-interrupted", []string{launch.EnvBinary + "=" + f.Bin, "TMPDIR=" + tmp}, func(p *os.Process) {
		if err := p.Signal(os.Interrupt); err != nil {
			t.Error(err)
		}
	})
	if ws := r.state.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("child ended with %v, want SIGINT; output:\n%s", r.state, r.output)
	}
	if !strings.Contains(r.output, "testenv: interrupt: stopping tigerbeetle servers") {
		t.Errorf("child output lacks the interrupt notice:\n%s", r.output)
	}
	if pid := r.serverPid(t); !fake.Gone(pid) {
		t.Errorf("server %d still running after the interrupted binary exited", pid)
	}
	if _, err := os.Stat(r.out["dir"]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("shared dir %s left after the interrupt: %v", r.out["dir"], err)
	}
}

func TestMainPrintsOneSkipLine(t *testing.T) {
	t.Parallel()
	r := runChild(t, "skips", []string{launch.EnvBinary + "=", "PATH=" + t.TempDir()}, nil)
	if !r.state.Success() {
		t.Fatalf("child ended with %v; output:\n%s", r.state, r.output)
	}
	var lines []string
	for _, l := range strings.Split(r.output, "\n") {
		if strings.Contains(l, "needing a real tigerbeetle server skipped") {
			lines = append(lines, l)
		}
	}
	want := "testenv: 3 test(s) needing a real tigerbeetle server skipped: no binary; set $TIGERBEETLE_BIN or put tigerbeetle on PATH (scripts/install-tigerbeetle.sh installs one)"
	if len(lines) != 1 || lines[0] != want {
		t.Errorf("summary lines = %q, want [%q]; output:\n%s", lines, want, r.output)
	}
}

// A cluster's cleanup stops the replicas still running, quietly leaves the ones the test
// killed, and removes every data file.
func TestStartClusterStopsAndRemovesOnCleanup(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	var c *Cluster
	var replicas []*launch.Process
	t.Run("user", func(t *testing.T) {
		c = StartCluster(t, 3, launch.WithBinary(f.Bin), launch.WithProbe(fake.DialProbe))
		if c.Replicas() != 3 || len(c.Addresses) != 3 {
			t.Fatalf("cluster of %d replicas at %q", c.Replicas(), c.Addresses)
		}
		if err := c.KillReplica(2); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			replicas = append(replicas, c.Replica(i))
		}
	})
	for _, p := range replicas {
		if !fake.Gone(p.Cmd.Process.Pid) {
			t.Errorf("replica %d still running after the test that started it ended", p.Replica)
		}
		if _, err := os.Stat(p.DataFile); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("data file of replica %d still there after the test ended: %v", p.Replica, err)
		}
	}
	for _, call := range f.Calls(t)[:3] {
		if !strings.Contains(call, "--replica-count=3 --development") {
			t.Errorf("format call %q lacks --replica-count=3 --development", call)
		}
	}
}

// Under -short, a test that names its own (fake) binary still runs: only the search for a
// real server is skipped.
func TestStartWithExplicitBinaryRunsUnderShort(t *testing.T) {
	t.Parallel()
	f := fake.New(t, fake.Options{})
	c := &captureTB{TB: t}
	c.run(func(tb testing.TB) { Start(tb, launch.WithBinary(f.Bin), launch.WithProbe(fake.DialProbe)) })
	if c.skipped != "" || c.failed != "" {
		t.Errorf("Start with WithBinary: skipped %q, failed %q; want it started", c.skipped, c.failed)
	}
}
