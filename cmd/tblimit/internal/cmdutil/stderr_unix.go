//go:build unix

package cmdutil

import (
	"bufio"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The TigerBeetle client (native code linked into tblimit) logs on the process's file
// descriptor 2: a "warning(message_bus): ... ConnectionRefused" line on every reconnect
// attempt, so a command against a dead address would print a screenful of them before its
// own one-line error. The 0.17.9 Go client offers no way to quiet it: the native library
// has a log callback (tb_client_register_log_callback in tb_client.h) but the Go package
// neither calls it nor lets us, and calling it ourselves would take cgo against another
// package's static library. So Main points descriptor 2 at a pipe and copies what comes
// through to the real stderr, leaving out the client's warning(message_bus) and info(...)
// lines unless --verbose. tblimit's own messages do not go through the pipe: Main hands the
// commands the real stderr.

// nativeLogLine matches the client's lines that are dropped.
var nativeLogLine = regexp.MustCompile(`^(warning\(message_bus\)|info\([a-z_]+\)): `)

// stderrFilter is the pipe behind descriptor 2.
type stderrFilter struct {
	stderr *os.File // the real stderr, a duplicate of the original descriptor 2
	keep   atomic.Bool
	done   chan struct{}
}

// nativeLogs is Main's filter, nil in tests that call Run in-process.
var nativeLogs *stderrFilter

// filterStderr installs the filter; restore puts descriptor 2 back and lets the filter
// drain. On failure it changes nothing and returns the process's stderr.
func filterStderr() (f *stderrFilter, restore func()) {
	// Close-on-exec: the processes tblimit starts (tigerbeetle up's
	// supervisor and server, which outlive it) must not hold the caller's
	// stderr open.
	fd, err := unix.FcntlInt(2, unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, func() {}
	}
	real := os.NewFile(uintptr(fd), "/dev/stderr")
	r, w, err := os.Pipe()
	if err == nil {
		err = unix.Dup2(int(w.Fd()), 2)
		w.Close() // descriptor 2 holds the write end now
	}
	if err != nil {
		if r != nil {
			r.Close()
		}
		real.Close()
		return nil, func() {}
	}
	// A crash's output goes to the real stderr too: the filter dies with the process.
	_ = debug.SetCrashOutput(real, debug.CrashOptions{})
	f = &stderrFilter{stderr: real, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer r.Close()
		f.copy(r, real)
	}()
	return f, func() {
		_ = unix.Dup2(int(real.Fd()), 2) // closes the last write end: the filter reads EOF
		select {
		case <-f.done:
		case <-time.After(time.Second): // a native thread still writing: give up on the rest
		}
	}
}

// keepAll makes the filter pass the client's lines too (--verbose).
func (f *stderrFilter) keepAll() { f.keep.Store(true) }

// copy passes what r gives to w, line by line, but the client's lines unless keepAll.
func (f *stderrFilter) copy(r io.Reader, w io.Writer) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" && (f.keep.Load() || !nativeLogLine.MatchString(line)) {
			_, _ = io.WriteString(w, line)
		}
		if err != nil {
			return
		}
	}
}
