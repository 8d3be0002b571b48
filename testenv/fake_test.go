//go:build unix

package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Modes of the fake server.
const (
	fakeServe      = "serve"       // listen, print the port with --addresses=0, never answer
	fakeIgnoreTerm = "ignore-term" // like serve, but ignore SIGTERM
	fakeExitEarly  = "exit-early"  // complain on stderr and exit 1
	fakeHang       = "hang"        // never print a port, never listen
	fakeBadPort    = "bad-port"    // print something that is not a port
)

// fakeServer plays `tigerbeetle start` the way TigerBeetle's main.zig does for the parts
// Launch relies on: with --addresses=0 it listens on a free loopback port, prints the port
// and only the port on stdout, and exits when its stdin closes. It logs "pid N" to
// $TESTENV_FAKE_LOG and never answers a client.
func fakeServer(mode string, args []string) int {
	logf := func(format string, a ...any) {
		f, err := os.OpenFile(os.Getenv(envFakeLog), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return
		}
		fmt.Fprintf(f, format+"\n", a...)
		f.Close()
	}
	logf("pid %d", os.Getpid())
	if len(args) == 0 || args[0] != "start" {
		fmt.Fprintf(os.Stderr, "fake tigerbeetle: want start, got %q\n", args)
		return 2
	}
	var addresses string
	for _, a := range args[1:] {
		if v, ok := strings.CutPrefix(a, "--addresses="); ok {
			addresses = v
		}
	}
	watchStdin := func() {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			fmt.Fprintln(os.Stderr, "info(main): stdin closed, exiting")
			logf("stdin closed")
			os.Exit(0)
		}()
	}
	switch mode {
	case fakeExitEarly:
		fmt.Fprintln(os.Stderr, "info(main): opening data file")
		fmt.Fprintln(os.Stderr, "error(main): fake: the data file is locked by another process")
		return 1
	case fakeHang:
		watchStdin()
		select {}
	case fakeBadPort:
		watchStdin()
		fmt.Println("hello")
		select {}
	case fakeIgnoreTerm:
		signal.Ignore(syscall.SIGTERM)
	case fakeServe:
	default:
		fmt.Fprintf(os.Stderr, "fake tigerbeetle: unknown mode %q\n", mode)
		return 2
	}
	listen := addresses
	if addresses == "0" {
		listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error(main): %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "info(main): 0: cluster=0: listening on %v\n", ln.Addr())
	if addresses == "0" {
		fmt.Printf("%d\n", ln.Addr().(*net.TCPAddr).Port)
		os.Stdout.Close()
		watchStdin()
	}
	var conns []net.Conn
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		conns = append(conns, c) // hold, never answer
	}
}

// fake is a fake tigerbeetle binary: a shell script that logs its arguments, creates the
// data file on format, and execs the test binary as fakeServer on start.
type fake struct {
	bin string // the script
	log string // one line per invocation ("format ...", "start ...") and "pid N" lines
}

type fakeOpts struct {
	mode        string // fakeServer mode; fakeServe if empty
	formatFails bool
}

func newFake(t testing.TB, o fakeOpts) *fake {
	t.Helper()
	if o.mode == "" {
		o.mode = fakeServe
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &fake{bin: filepath.Join(dir, "tigerbeetle"), log: filepath.Join(dir, "log")}
	formatEnd := `echo "info(main): 0: formatted: cluster=0 replica_count=1" >&2; exit 0`
	if o.formatFails {
		formatEnd = `echo "error(cli): fake: cannot allocate data file" >&2; exit 1`
	}
	script := `#!/bin/sh
printf '%s\n' "$*" >> ` + shellQuote(f.log) + `
case "$1" in
format)
	for a in "$@"; do file=$a; done
	: > "$file"
	` + formatEnd + `
	;;
start)
	` + envFakeMode + `=` + shellQuote(o.mode) + ` ` + envFakeLog + `=` + shellQuote(f.log) + ` exec ` + shellQuote(self) + ` "$@"
	;;
version)
	echo "TigerBeetle version 0.17.9"
	;;
*)
	echo "fake tigerbeetle: unknown command $1" >&2
	exit 2
	;;
esac
`
	if err := os.WriteFile(f.bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// calls returns the logged invocations, without the pid lines.
func (f *fake) calls(t testing.TB) []string {
	t.Helper()
	var calls []string
	for _, l := range f.lines(t) {
		if !strings.HasPrefix(l, "pid ") && l != "stdin closed" {
			calls = append(calls, l)
		}
	}
	return calls
}

// pids returns the pids of the fake servers started so far.
func (f *fake) pids(t testing.TB) []int {
	t.Helper()
	var pids []int
	for _, l := range f.lines(t) {
		if s, ok := strings.CutPrefix(l, "pid "); ok {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("bad log line %q", l)
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

func (f *fake) lines(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(f.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// gone reports whether pid has exited (a zombie counts as exited: a container's init may
// be slow to reap orphans).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// waitGone fails the test unless pid exits within d.
func waitGone(t testing.TB, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running %v later", pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
