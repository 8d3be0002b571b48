package root

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/cmd/tblimit/tigerbeetle"
	"github.com/tblimit/tblimit/testenv/fake"
)

// hungServer is the test binary with $TBLIMIT_CLI_TEST_HUNG=1: a server that
// runs but never answers, like a busy one. It listens on a loopback port,
// prints its address, reads what clients send and never replies, until it is
// killed or its standard input closes (the test is gone).
func hungServer() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ln.Addr())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// startHung starts a hungServer whose command line names dir, as those of
// a supervisor and a server in dir do, and returns its pid, its address and
// a channel closed once it has exited (it is reaped at once, so that it
// leaves no zombie for down to wait on).
func startHung(t *testing.T, dir string) (pid int, addr string, exited <-chan struct{}) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "tigerbeetle", "serve", "--dir", dir)
	cmd.Env = append(os.Environ(), envHung+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		<-done
	})
	if err != nil {
		t.Fatalf("the hung server printed %q: %v", line, err)
	}
	return cmd.Process.Pid, strings.TrimSpace(line), done
}

// writeState records st as the state of the server in dir, as tigerbeetle
// serve does.
func writeState(t *testing.T, dir string, st tigerbeetle.ServerJSON) []byte {
	t.Helper()
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, tigerbeetle.StateFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// failingBinary returns a tigerbeetle binary that fails at once: up gets that
// far only if it decided to start a server.
func failingBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tigerbeetle")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"fake tigerbeetle: cannot $1\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// A server whose processes are alive but that does not answer (busy, or all
// its client sessions in use) is reported as running but not answering; up
// neither forgets it nor starts a second one, and down still stops it.
func TestServerNotAnswering(t *testing.T) {
	t.Setenv(envMain, "1") // were up to start a server, it would re-execute this binary as tblimit
	dir := t.TempDir()
	super, _, superExited := startHung(t, dir)
	server, addr, serverExited := startHung(t, dir)
	state := writeState(t, dir, tigerbeetle.ServerJSON{
		Running: true, Answering: true, PID: super, ServerPID: server, Addresses: []string{addr},
		Dir: dir, DataFile: filepath.Join(dir, "0_0.tigerbeetle"), LogFile: filepath.Join(dir, tigerbeetle.LogFile), Development: true,
	})
	e := &cliEnv{t: t, ctx: t.Context(), base: []string{"--timeout", "200ms"}}

	r := e.code(cmdutil.ExitError, "tigerbeetle", "status", "--dir", dir)
	for _, want := range []string{"running but not answering", addr, fmt.Sprintf("pid %d", server), "no answer within 200ms", "tblimit tigerbeetle down --dir"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tigerbeetle status = %q, want %q in it", r.stdout, want)
		}
	}
	var st tigerbeetle.ServerJSON
	e.json(cmdutil.ExitError, &st, "tigerbeetle", "status", "--dir", dir)
	if !st.Running || st.Answering || st.PID != super || st.ServerPID != server {
		t.Errorf("tigerbeetle status -o json = %+v, want running, not answering, pids %d and %d", st, super, server)
	}

	r = e.code(cmdutil.ExitError, "tigerbeetle", "up", "--dir", dir, "--binary", failingBinary(t), "--port", "0")
	for _, want := range []string{"not answering", addr, fmt.Sprintf("pid %d", server), "not starting a second one", "tblimit tigerbeetle down --dir"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("tigerbeetle up = %q on stderr, want %q in it", r.stderr, want)
		}
	}
	if strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
		t.Errorf("tigerbeetle up: stdout %q, stderr %q, want one line on stderr", r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, tigerbeetle.StateFile)); !bytes.Equal(b, state) {
		t.Errorf("after tigerbeetle up, %s = %q, %v, want it unchanged", tigerbeetle.StateFile, b, err)
	}

	if out := e.ok("tigerbeetle", "down", "--dir", dir); !strings.Contains(out, fmt.Sprintf("stopped tigerbeetle (pid %d)", server)) {
		t.Errorf("tigerbeetle down = %q, want it stopped", out)
	}
	for _, exited := range []<-chan struct{}{superExited, serverExited} {
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Fatalf("after tigerbeetle down, pid %d or %d still runs", super, server)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, tigerbeetle.StateFile)); !os.IsNotExist(err) {
		t.Errorf("after tigerbeetle down, %s: %v, want it gone", tigerbeetle.StateFile, err)
	}
	e.json(cmdutil.ExitError, &st, "tigerbeetle", "status", "--dir", dir)
	if st.Running || st.Answering {
		t.Errorf("tigerbeetle status after down = %+v, want not running", st)
	}
}

// A state file whose processes are gone is stale: status says not running
// and up replaces it. On Linux, a recorded pid that another process took
// over (after a crash or a reboot) counts as gone.
func TestServerStaleState(t *testing.T) {
	t.Setenv(envMain, "1") // up re-executes this binary as tblimit
	bin := failingBinary(t)
	dir := t.TempDir()
	pid, addr, exited := startHung(t, dir)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	type recorded struct {
		name string
		pid  int
	}
	cases := []recorded{{"exited", pid}}
	if runtime.GOOS == "linux" {
		cases = append(cases, recorded{"taken over", os.Getpid()}) // alive, but no process of a server in dir
	}
	e := &cliEnv{t: t, ctx: t.Context(), base: []string{"--timeout", "200ms"}}
	for _, c := range cases {
		writeState(t, dir, tigerbeetle.ServerJSON{Running: true, Answering: true, PID: c.pid, ServerPID: c.pid, Addresses: []string{addr}, Dir: dir})
		var st tigerbeetle.ServerJSON
		e.json(cmdutil.ExitError, &st, "tigerbeetle", "status", "--dir", dir)
		if st.Running || st.Answering {
			t.Errorf("%s: tigerbeetle status = %+v, want not running", c.name, st)
		}
		r := e.code(cmdutil.ExitError, "tigerbeetle", "up", "--dir", dir, "--binary", bin, "--port", "0")
		if !strings.Contains(r.stderr, "fake tigerbeetle: cannot format") {
			t.Errorf("%s: tigerbeetle up = %q on stderr, want it to have started the binary", c.name, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, tigerbeetle.StateFile)); !os.IsNotExist(err) {
			t.Errorf("%s: after tigerbeetle up, %s: %v, want the stale one gone", c.name, tigerbeetle.StateFile, err)
		}
	}
}

// upCluster starts a cluster of three fake replicas with tigerbeetle up and
// stops it when the test ends, on a context of its own: the test's is
// cancelled before cleanups run.
func upCluster(t *testing.T, dir string) (*cliEnv, *fake.Fake, tigerbeetle.ServerJSON) {
	t.Helper()
	t.Setenv(envMain, "1")      // up re-executes this binary as tblimit
	t.Setenv(envFakeProbe, "1") // whose supervisor accepts the fake
	f := fake.New(t, fake.Options{})
	e := &cliEnv{t: t, ctx: t.Context(), base: []string{"--timeout", "200ms"}}
	var st tigerbeetle.ServerJSON
	e.json(cmdutil.ExitOK, &st, "tigerbeetle", "up", "--dir", dir, "--replicas", "3", "--port", "0", "--binary", f.Bin)
	t.Cleanup(func() {
		down := &cliEnv{t: t, ctx: context.Background()}
		if r := down.run("tigerbeetle", "down", "--dir", dir); r.code != cmdutil.ExitOK {
			t.Errorf("tigerbeetle down = %d: %s", r.code, r.stderr)
		}
	})
	return e, f, st
}

// replicaState returns what status says of each replica.
func replicaState(t *testing.T, e *cliEnv, dir string) tigerbeetle.ServerJSON {
	t.Helper()
	var st tigerbeetle.ServerJSON
	e.json(cmdutil.ExitError, &st, "tigerbeetle", "status", "--dir", dir) // a fake never answers a client
	if !st.Running || len(st.Replicas) != 3 {
		t.Fatalf("tigerbeetle status = %+v, want a running cluster of 3", st)
	}
	return st
}

// A cluster by hand: up --replicas 3, a replica killed and brought back by
// up, all killed and brought back, then down.
func TestServerClusterByHand(t *testing.T) {
	dir := t.TempDir()
	e, f, st := upCluster(t, dir)
	if !st.Running || !st.Answering || len(st.Replicas) != 3 || len(st.Addresses) != 3 {
		t.Fatalf("tigerbeetle up --replicas 3 = %+v", st)
	}
	for i, r := range st.Replicas {
		if r.Replica != i || !r.Running || r.Address != st.Addresses[i] || r.DataFile != filepath.Join(dir, fmt.Sprintf("0_%d.tigerbeetle", i)) {
			t.Errorf("replica %d = %+v", i, r)
		}
	}
	r := e.code(cmdutil.ExitError, "tigerbeetle", "status", "--dir", dir)
	for _, want := range []string{"cluster of 3 replicas is running but not answering", "replica 2 at " + st.Addresses[2] + ": running"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tigerbeetle status = %q, want %q in it", r.stdout, want)
		}
	}

	killed := st.Replicas[1].PID
	if out := e.ok("tigerbeetle", "down", "--dir", dir, "--replica", "1", "--kill"); !strings.Contains(out, fmt.Sprintf("killed replica 1 (pid %d)", killed)) {
		t.Errorf("tigerbeetle down --replica 1 --kill = %q", out)
	}
	now := replicaState(t, e, dir)
	if now.Replicas[1].Running || !now.Replicas[0].Running || !now.Replicas[2].Running || !fake.Gone(killed) {
		t.Fatalf("after killing replica 1: %+v", now.Replicas)
	}
	if out := e.ok("tigerbeetle", "up", "--dir", dir); !strings.Contains(out, "restarted replica(s) 1") {
		t.Errorf("tigerbeetle up with replica 1 down = %q", out)
	}
	now = replicaState(t, e, dir)
	for i, r := range now.Replicas {
		if !r.Running || r.Address != st.Addresses[i] || (i == 1) == (r.PID == st.Replicas[i].PID) {
			t.Errorf("after up, replica %d = %+v, want running at %s, a new pid only for replica 1", i, r, st.Addresses[i])
		}
	}
	r = e.code(cmdutil.ExitError, "tigerbeetle", "up", "--dir", dir, "--replicas", "1")
	if !strings.Contains(r.stderr, "with 3 replica(s), not 1") {
		t.Errorf("tigerbeetle up --replicas 1 on a cluster of 3: %q", r.stderr)
	}

	e.ok("tigerbeetle", "down", "--dir", dir, "--kill")
	now = replicaState(t, e, dir)
	if down := now.Down(); len(down) != 3 {
		t.Fatalf("after down --kill: replicas %v down, want all; %+v", down, now)
	}
	e.ok("tigerbeetle", "up", "--dir", dir)
	if down := replicaState(t, e, dir).Down(); len(down) != 0 {
		t.Fatalf("after up: replicas %v still down", down)
	}

	last := replicaState(t, e, dir)
	if out := e.ok("tigerbeetle", "down", "--dir", dir); !strings.Contains(out, "stopped the tigerbeetle cluster of 3 replicas") {
		t.Errorf("tigerbeetle down = %q", out)
	}
	for _, pid := range []int{last.PID, last.Replicas[0].PID, last.Replicas[1].PID, last.Replicas[2].PID} {
		fake.WaitGone(t, pid, 10*time.Second)
	}
	if _, err := os.Stat(filepath.Join(dir, tigerbeetle.StateFile)); !os.IsNotExist(err) {
		t.Errorf("after down, %s: %v, want it gone", tigerbeetle.StateFile, err)
	}
	formats := 0
	for _, c := range f.Calls(t) {
		if strings.HasPrefix(c, "format ") {
			formats++
		}
	}
	if formats != 3 {
		t.Errorf("%d formats, want 3 (restarts reuse the data files): %q", formats, f.Calls(t))
	}
}

func TestServerFlags(t *testing.T) {
	e := &cliEnv{t: t, ctx: t.Context()}
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--replicas", "0"}, "--replicas 0: want 1 to 6"},
		{[]string{"up", "--replicas", "7"}, "--replicas 7"},
		{[]string{"up", "--replicas", "3", "--port", "65534"}, "--port 65534: want 0 to 65533"},
		{[]string{"down", "--purge", "--kill"}, "--purge stops everything"},
		{[]string{"down", "--replica", "9"}, "--replica 9"},
	} {
		r := e.code(cmdutil.ExitUsage, append([]string{"tigerbeetle"}, append(c.args, "--dir", dir)...)...)
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("tigerbeetle %s: %q, want %q", strings.Join(c.args, " "), r.stderr, c.want)
		}
	}
	r := e.code(cmdutil.ExitError, "tigerbeetle", "down", "--dir", dir, "--replica", "1")
	if !strings.Contains(r.stderr, "not running") {
		t.Errorf("down --replica 1 with nothing running: %q", r.stderr)
	}
}

// up's background processes keep none of its descriptors: a caller that
// captures its output (out=$(tblimit tigerbeetle up)) reads to the end once
// up has exited, while the server runs on.
func TestUpLeavesNoDescriptor(t *testing.T) {
	t.Setenv(envFakeProbe, "1") // the supervisor accepts the fake
	f := fake.New(t, fake.Options{})
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "--timeout", "200ms", "tigerbeetle", "up", "--dir", dir, "--port", "0", "--binary", f.Bin)
	cmd.Env = append(os.Environ(), envMain+"=1")
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() {
		down := &cliEnv{t: t, ctx: context.Background()}
		if r := down.run("tigerbeetle", "down", "--dir", dir); r.code != cmdutil.ExitOK {
			t.Errorf("tigerbeetle down = %d: %s", r.code, r.stderr)
		}
	})
	read := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		read <- string(b)
	}()
	err = cmd.Wait()
	select {
	case out := <-read:
		if err != nil || !strings.Contains(out, "started tigerbeetle in the background") {
			t.Errorf("tigerbeetle up = %v, output %q", err, out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("tigerbeetle up exited, but its output stayed open: a background process holds it")
	}
}

// up says how many client connections the server it starts accepts, and
// --limit-pipeline-requests raises it.
func TestUpClientConnections(t *testing.T) {
	t.Setenv(envMain, "1")
	t.Setenv(envFakeProbe, "1")
	for _, c := range []struct {
		args []string
		want int
		flag string
	}{
		{nil, 8, ""},
		{[]string{"--development=false"}, 32, ""},
		{[]string{"--limit-pipeline-requests", "57"}, 65, "--limit-pipeline-requests=57"},
	} {
		f := fake.New(t, fake.Options{})
		dir := t.TempDir()
		e := &cliEnv{t: t, ctx: t.Context(), base: []string{"--timeout", "200ms"}}
		var st tigerbeetle.ServerJSON
		e.json(cmdutil.ExitOK, &st, append([]string{"tigerbeetle", "up", "--dir", dir, "--port", "0", "--binary", f.Bin}, c.args...)...)
		down := &cliEnv{t: t, ctx: context.Background()}
		if r := down.run("tigerbeetle", "down", "--dir", dir); r.code != cmdutil.ExitOK {
			t.Errorf("tigerbeetle down = %d: %s", r.code, r.stderr)
		}
		if st.ClientConnections != c.want {
			t.Errorf("up %q: client_connections %d, want %d", c.args, st.ClientConnections, c.want)
		}
		if calls := strings.Join(f.Calls(t), "\n"); c.flag != "" && !strings.Contains(calls, "--experimental") || !strings.Contains(calls, c.flag) {
			t.Errorf("up %q started %q, want %q", c.args, calls, c.flag)
		}
	}
}
