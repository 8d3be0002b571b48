//go:build unix

// Package fake is a stand-in tigerbeetle binary for the tests of the launcher, the harness
// and the CLI, on a machine without a real one. A test binary becomes the fake server when
// its TestMain calls Serve first.
package fake

import (
	"bufio"
	"context"
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
	ModeServe      = "serve"       // listen, print the port with --addresses=0, never answer
	ModeIgnoreTerm = "ignore-term" // like serve, but ignore SIGTERM
	ModeExitEarly  = "exit-early"  // complain on stderr and exit 1
	ModeHang       = "hang"        // never print a port, never listen
	ModeBadPort    = "bad-port"    // print something that is not a port
)

// Environment of the fake server process.
const (
	envMode = "TBLIMIT_FAKE_TIGERBEETLE"
	envLog  = "TBLIMIT_FAKE_LOG"
)

// Serve turns this process into a fake `tigerbeetle start` and exits, if it was started as
// one; otherwise it returns at once. Call it first thing in TestMain.
func Serve() {
	if mode := os.Getenv(envMode); mode != "" {
		os.Exit(server(mode, os.Args[1:]))
	}
}

// server plays `tigerbeetle start` the way TigerBeetle's main.zig does for the parts the
// launcher relies on: with --addresses=0 it listens on a free loopback port, prints the port
// and only the port on stdout, and exits when its stdin closes; with a list of addresses it
// listens on the one of its replica, whose index the fake format wrote in the data file
// (tigerbeetle also takes it from the data file). It logs "pid N" to $TBLIMIT_FAKE_LOG and
// never answers a client.
func server(mode string, args []string) int {
	logf := func(format string, a ...any) {
		f, err := os.OpenFile(os.Getenv(envLog), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return
		}
		fmt.Fprintf(f, format+"\n", a...)
		f.Close()
	}
	logf("pid %d", os.Getpid())
	if len(args) < 2 || args[0] != "start" {
		fmt.Fprintf(os.Stderr, "fake tigerbeetle: want start ... FILE, got %q\n", args)
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
	case ModeExitEarly:
		fmt.Fprintln(os.Stderr, "info(main): opening data file")
		fmt.Fprintln(os.Stderr, "error(main): fake: the data file is locked by another process")
		return 1
	case ModeHang:
		watchStdin()
		select {}
	case ModeBadPort:
		watchStdin()
		fmt.Println("hello")
		select {}
	case ModeIgnoreTerm:
		signal.Ignore(syscall.SIGTERM)
	case ModeServe:
	default:
		fmt.Fprintf(os.Stderr, "fake tigerbeetle: unknown mode %q\n", mode)
		return 2
	}
	listen := "127.0.0.1:0"
	if addresses != "0" {
		b, err := os.ReadFile(args[len(args)-1])
		replica, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		list := strings.Split(addresses, ",")
		if err != nil || perr != nil || replica < 0 || replica >= len(list) {
			fmt.Fprintf(os.Stderr, "error(main): fake: data file %s: %v %v, %d addresses\n", args[len(args)-1], err, perr, len(list))
			return 1
		}
		listen = list[replica]
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
	var conns []net.Conn // held, never answered, never collected
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		conns = append(conns, c)
		_ = conns
	}
}

// Fake is a fake tigerbeetle binary: a shell script that logs its arguments, writes the
// replica index into the data file on format, and execs the test binary as the fake server
// on start.
type Fake struct {
	Bin string // the script
	Log string // one line per invocation ("format ...", "start ...") and "pid N" lines
}

// Options say how the fake behaves.
type Options struct {
	Mode        string // the server's mode; ModeServe if empty
	FormatFails bool
}

// New writes a fake binary into a temporary directory of t. The test binary's TestMain must
// call Serve.
func New(t testing.TB, o Options) *Fake {
	t.Helper()
	if o.Mode == "" {
		o.Mode = ModeServe
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &Fake{Bin: filepath.Join(dir, "tigerbeetle"), Log: filepath.Join(dir, "log")}
	formatEnd := `echo "info(main): 0: formatted: cluster=0 replica=$replica" >&2; exit 0`
	if o.FormatFails {
		formatEnd = `echo "error(cli): fake: cannot allocate data file" >&2; exit 1`
	}
	script := `#!/bin/sh
printf '%s\n' "$*" >> ` + quote(f.Log) + `
case "$1" in
format)
	replica=
	for a in "$@"; do
		case "$a" in --replica=*) replica=${a#--replica=} ;; esac
		file=$a
	done
	printf '%s\n' "$replica" > "$file"
	` + formatEnd + `
	;;
start)
	` + envMode + `=` + quote(o.Mode) + ` ` + envLog + `=` + quote(f.Log) + ` exec ` + quote(self) + ` "$@"
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
	if err := os.WriteFile(f.Bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Calls returns the logged invocations, without the pid lines.
func (f *Fake) Calls(t testing.TB) []string {
	t.Helper()
	var calls []string
	for _, l := range f.lines(t) {
		if !strings.HasPrefix(l, "pid ") && l != "stdin closed" {
			calls = append(calls, l)
		}
	}
	return calls
}

// Pids returns the pids of the fake servers started so far.
func (f *Fake) Pids(t testing.TB) []int {
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

func (f *Fake) lines(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(f.Log)
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

// Gone reports whether pid has exited (a zombie counts as exited: a container's init may
// be slow to reap orphans).
func Gone(pid int) bool {
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

// WaitGone fails the test unless pid exits within d.
func WaitGone(t testing.TB, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !Gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running %v later", pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitAllGone fails the test unless every fake server started so far exits within d.
func (f *Fake) WaitAllGone(t testing.TB, d time.Duration) {
	t.Helper()
	for _, pid := range f.Pids(t) {
		WaitGone(t, pid, d)
	}
}

// DialProbe is ready as soon as a TCP connection to the first address succeeds: enough for
// a fake server, which does not speak TigerBeetle's protocol. Like the real client, it
// retries until ctx is done.
func DialProbe(ctx context.Context, _ uint64, addresses []string) error {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addresses[0])
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
