package testenv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// echo is a plain TCP echo server that counts the bytes it received.
type echo struct {
	ln       net.Listener
	received atomic.Int64
}

func startEcho(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					e.received.Add(int64(n))
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return e
}

// proxied starts an echo server and a proxy in front of it.
func proxied(t *testing.T, opts ...ProxyOption) (*echo, *Proxy) {
	t.Helper()
	e := startEcho(t)
	return e, StartProxy(t, e.ln.Addr().String(), opts...)
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), patient)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back within limit; it returns how long that took, or
// the read's error.
func roundTrip(t *testing.T, c net.Conn, msg string, limit time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	if _, err := c.Write([]byte(msg)); err != nil {
		return 0, err
	}
	_ = c.SetReadDeadline(start.Add(limit))
	defer c.SetReadDeadline(time.Time{})
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return time.Since(start), err
	}
	if string(got) != msg {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
	return time.Since(start), nil
}

func mustRoundTrip(t *testing.T, c net.Conn, msg string, limit time.Duration) time.Duration {
	t.Helper()
	d, err := roundTrip(t, c, msg, limit)
	if err != nil {
		t.Fatalf("round trip of %q: %v", msg, err)
	}
	return d
}

// timedOut reports whether err is a read deadline passing, which is what a connection that
// hangs (rather than closes) gives.
func timedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// patient bounds what must succeed: a round trip on loopback takes
// microseconds, but a loaded machine may not schedule it for a while. The
// calls that must fail (a hung connection) keep a short deadline.
const patient = 10 * time.Second

func TestProxyForwards(t *testing.T) {
	e, p := proxied(t)
	c := dial(t, p)
	mustRoundTrip(t, c, "hello", patient)
	big := strings.Repeat("x", 200<<10)
	mustRoundTrip(t, c, big, patient)
	if s := p.Stats(); s.Accepted != 1 || s.Up != int64(5+len(big)) || s.Down != s.Up || e.received.Load() != s.Up {
		t.Fatalf("Stats() = %+v, echo received %d", s, e.received.Load())
	}
}

func TestProxyDelay(t *testing.T) {
	const d = 300 * time.Millisecond
	for _, tc := range []struct {
		dir  Direction
		want time.Duration
	}{{Up, d}, {Down, d}, {Both, 2 * d}} {
		t.Run(tc.dir.String(), func(t *testing.T) {
			_, p := proxied(t)
			c := dial(t, p)
			if took := mustRoundTrip(t, c, "a", patient); took >= d {
				t.Fatalf("a round trip before Delay took %v", took)
			}
			p.Delay(tc.dir, d)
			if took := mustRoundTrip(t, c, "b", patient); took < tc.want {
				t.Fatalf("Delay(%v, %v): a round trip took %v, want at least %v", tc.dir, d, took, tc.want)
			}
			p.Heal()
			if took := mustRoundTrip(t, c, "c", patient); took >= d {
				t.Fatalf("after Heal a round trip took %v", took)
			}
		})
	}
}

func TestProxyThrottle(t *testing.T) {
	_, p := proxied(t)
	c := dial(t, p)
	p.Throttle(Down, 20_000)
	msg := strings.Repeat("y", 10_000) // half a second at 20 kB/s
	took := mustRoundTrip(t, c, msg, patient)
	if took < 400*time.Millisecond || took > patient {
		t.Fatalf("10 kB at 20 kB/s took %v, want about 0.5 s", took)
	}
	p.Heal()
	if took := mustRoundTrip(t, c, msg, patient); took > 300*time.Millisecond {
		t.Fatalf("after Heal 10 kB took %v", took)
	}
}

func TestProxyHang(t *testing.T) {
	e, p := proxied(t)
	c := dial(t, p)
	mustRoundTrip(t, c, "a", patient)
	p.Hang(Both)
	if _, err := roundTrip(t, c, "b", 300*time.Millisecond); !timedOut(err) {
		t.Fatalf("a round trip on a hung connection: %v, want a timeout (no answer, not closed)", err)
	}
	if n := e.received.Load(); n != 1 {
		t.Fatalf("the server received %d bytes while the link hung, want the 1 from before", n)
	}
	fresh := dial(t, p) // accepted, and hangs too
	if _, err := roundTrip(t, fresh, "c", 300*time.Millisecond); !timedOut(err) {
		t.Fatalf("a new connection while hung: %v, want a timeout", err)
	}
	p.Heal() // what was held goes through, in order
	got := make([]byte, 1)
	_ = c.SetReadDeadline(time.Now().Add(patient))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "b" {
		t.Fatalf("after Heal the held byte came back as %q, %v", got, err)
	}
	_ = fresh.SetReadDeadline(time.Now().Add(patient))
	if _, err := io.ReadFull(fresh, got); err != nil || string(got) != "c" {
		t.Fatalf("after Heal the new connection's held byte came back as %q, %v", got, err)
	}
	mustRoundTrip(t, c, "d", patient)
	if s := p.Stats(); s.Dropped != 0 {
		t.Fatalf("a hang dropped %d connections", s.Dropped)
	}
}

func TestProxyHangOneWay(t *testing.T) {
	e, p := proxied(t)
	c := dial(t, p)
	p.Hang(Down)
	if _, err := roundTrip(t, c, "a", 300*time.Millisecond); !timedOut(err) {
		t.Fatalf("round trip with the replies hung: %v, want a timeout", err)
	}
	if n := e.received.Load(); n != 1 {
		t.Fatalf("the server received %d bytes with only the replies hung, want 1", n)
	}
}

func TestProxyBlackhole(t *testing.T) {
	e, p := proxied(t)
	c := dial(t, p)
	p.Blackhole(Up)
	if _, err := roundTrip(t, c, "lost", 300*time.Millisecond); !timedOut(err) {
		t.Fatalf("round trip into a blackhole: %v, want a timeout", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := e.received.Load(); n != 0 {
		t.Fatalf("the server received %d bytes sent into a blackhole", n)
	}
	p.Heal() // the stream lost bytes: its connection is closed
	_ = c.SetReadDeadline(time.Now().Add(patient))
	if _, err := c.Read(make([]byte, 1)); err == nil || timedOut(err) {
		t.Fatalf("after Heal a blackholed connection reads %v, want it closed", err)
	}
	mustRoundTrip(t, dial(t, p), "new", patient)
}

func TestProxyDrop(t *testing.T) {
	_, p := proxied(t)
	c := dial(t, p)
	mustRoundTrip(t, c, "a", patient)
	p.Drop()
	if _, err := roundTrip(t, c, "b", patient); err == nil || timedOut(err) {
		t.Fatalf("round trip after Drop: %v, want the connection closed", err)
	}
	mustRoundTrip(t, dial(t, p), "c", patient) // new connections pass
	if s := p.Stats(); s.Dropped != 1 || s.Accepted != 2 {
		t.Fatalf("Stats() = %+v, want 1 dropped of 2 accepted", s)
	}
}

func TestProxyRefuse(t *testing.T) {
	_, p := proxied(t)
	c := dial(t, p)
	mustRoundTrip(t, c, "a", patient)
	p.Refuse()
	if _, err := roundTrip(t, c, "a", patient); err == nil || timedOut(err) {
		t.Fatalf("round trip after Refuse: %v, want the connection closed", err)
	}
	for range 3 {
		fresh, err := net.DialTimeout("tcp", p.Addr(), patient)
		if err != nil {
			continue // reset before the dial returned: refused as well
		}
		_, err = roundTrip(t, fresh, "b", patient)
		fresh.Close()
		if err == nil || timedOut(err) {
			t.Fatalf("a new connection while refusing: %v, want it closed", err)
		}
	}
	if s := p.Stats(); s.Refused != 3 {
		t.Fatalf("Stats().Refused = %d, want 3", s.Refused)
	}
	p.Heal()
	mustRoundTrip(t, dial(t, p), "c", patient)
}

func TestProxyLoseReplies(t *testing.T) {
	e, p := proxied(t)
	c := dial(t, p)
	p.LoseReplies(1)
	if _, err := roundTrip(t, c, "applied", patient); err == nil || timedOut(err) {
		t.Fatalf("round trip whose reply is lost: %v, want the connection closed", err)
	}
	if n := e.received.Load(); n != int64(len("applied")) {
		t.Fatalf("the server received %d bytes, want the request's %d: the request must go through", n, len("applied"))
	}
	if s := p.Stats(); s.RepliesLost != 1 || s.Dropped != 1 {
		t.Fatalf("Stats() = %+v, want 1 reply lost, 1 connection dropped", s)
	}
	mustRoundTrip(t, dial(t, p), "again", patient) // only one was to be lost
}

// tbMessage is a TigerBeetle message of the given command and total size.
func tbMessage(command byte, size int) []byte {
	m := make([]byte, size)
	binary.LittleEndian.PutUint32(m[tbSizeOffset:], uint32(size))
	m[tbCommandIndex] = command
	for i := tbHeaderSize; i < size; i++ {
		m[i] = byte(i)
	}
	return m
}

func TestTigerBeetleFraming(t *testing.T) {
	f := TigerBeetleFraming
	pong, reply := tbMessage(4, tbHeaderSize), tbMessage(tbCommandReply, 1000)
	stream := append(append([]byte(nil), pong...), reply...)
	for _, tc := range []struct {
		b    []byte
		want int
	}{
		{nil, 0},
		{stream[:100], 0},
		{stream, tbHeaderSize},
		{stream[tbHeaderSize:], 1000},
		{stream[tbHeaderSize : tbHeaderSize+999], 0},
		{bytes.Repeat([]byte{0xff}, 300), 300}, // not TigerBeetle: passed on whole
	} {
		if got := f.Next(tc.b); got != tc.want {
			t.Errorf("Next(%d bytes) = %d, want %d", len(tc.b), got, tc.want)
		}
	}
	if f.Reply(pong) || !f.Reply(reply) {
		t.Errorf("Reply(pong), Reply(reply) = %v, %v, want false, true", f.Reply(pong), f.Reply(reply))
	}
}

// With TigerBeetle's framing the proxy loses a reply, not the message before it, even when
// both come in one read.
func TestProxyLosesATigerBeetleReply(t *testing.T) {
	e, p := proxied(t, WithFraming(TigerBeetleFraming))
	c := dial(t, p)
	pong, reply := tbMessage(4, tbHeaderSize), tbMessage(tbCommandReply, 600)
	p.LoseReplies(1)
	if _, err := c.Write(append(append([]byte(nil), pong...), reply...)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(patient))
	got, err := io.ReadAll(c)
	if !bytes.Equal(got, pong) || err == nil && len(got) != len(pong) {
		t.Fatalf("read %d bytes (%v), want the %d of the pong and then the connection closed", len(got), err, len(pong))
	}
	if n := e.received.Load(); n != int64(len(pong)+len(reply)) {
		t.Fatalf("the server received %d bytes, want %d", n, len(pong)+len(reply))
	}
	if s := p.Stats(); s.RepliesLost != 1 {
		t.Fatalf("Stats().RepliesLost = %d, want 1", s.RepliesLost)
	}
}

func TestProxyCommand(t *testing.T) {
	_, p := proxied(t)
	mustRoundTrip(t, dial(t, p), "hi", patient) // the one connection the stats line counts
	for _, tc := range []struct{ line, want, err string }{
		{"", "", ""},
		{"delay up 100ms", "ok", ""},
		{"delay both 0", "ok", ""},
		{"throttle down 1000", "ok", ""},
		{"hang", "ok", ""},
		{"hang down", "ok", ""},
		{"blackhole up", "ok", ""},
		{"lose 2", "ok", ""},
		{"heal", "ok", ""},
		{"drop", "ok", ""},
		{"refuse", "ok", ""},
		{"heal", "ok", ""},
		{"stats", "accepted 1, refused 0, dropped 1, replies lost 0, bytes up 2, down 2", ""},
		{"delay sideways 1s", "", "want up, down or both"},
		{"delay up", "", "want delay"},
		{"delay up soon", "", "want a duration"},
		{"throttle up -1", "", "want bytes a second"},
		{"hang up now", "", "want hang"},
		{"lose", "", "want lose N"},
		{"heal now", "", "takes no arguments"},
		{"explode", "", "unknown"},
	} {
		got, err := p.Command(tc.line)
		if tc.err == "" && (err != nil || got != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Command(%q) = %q, %v; want %q, error with %q", tc.line, got, err, tc.want, tc.err)
		}
	}
	mustRoundTrip(t, dial(t, p), "ok", patient)
	if _, err := p.Command("delay up 150ms"); err != nil {
		t.Fatal(err)
	}
	if took := mustRoundTrip(t, dial(t, p), "slow", patient); took < 150*time.Millisecond {
		t.Fatalf("after \"delay up 150ms\" a round trip took %v", took)
	}
}
