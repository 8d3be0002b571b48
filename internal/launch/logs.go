package launch

import (
	"bytes"
	"io"
	"sync"
)

// logKeep is how much of a server's output a Process keeps for error messages.
const logKeep = 64 << 10

// logBuffer keeps the last max bytes written to it and copies every write to w, if not nil.
// It is safe for concurrent use.
type logBuffer struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	dropped bool
	w       io.Writer
}

func newLogBuffer(max int, w io.Writer) *logBuffer {
	return &logBuffer{max: max, w: w}
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w != nil {
		// A failing copy must not stop the server's output from being drained.
		_, _ = b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.dropped = true
	}
	return len(p), nil
}

// Tail returns at most n of the last bytes written, starting at a line boundary when
// something was cut.
func (b *logBuffer) Tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf
	cut := b.dropped
	if len(s) > n {
		s = s[len(s)-n:]
		cut = true
	}
	if cut {
		if i := bytes.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
		return "[...]\n" + string(s)
	}
	return string(s)
}

// firstLine passes every write on to next and delivers the first line written (without
// its newline) on ch, once. tigerbeetle started with --addresses=0 prints its port, and only
// its port, as the first line on stdout.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	ch   chan string // capacity 1
	next io.Writer
}

func newFirstLine(next io.Writer) *firstLine {
	return &firstLine{ch: make(chan string, 1), next: next}
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	if !w.sent {
		w.buf = append(w.buf, p...)
		if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
			w.ch <- string(w.buf[:i])
			w.sent, w.buf = true, nil
		} else if len(w.buf) > 4096 {
			w.ch <- string(w.buf) // not a port; let the caller report it
			w.sent, w.buf = true, nil
		}
	}
	w.mu.Unlock()
	return w.next.Write(p)
}
