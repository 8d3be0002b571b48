package testenv

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Direction is a way bytes go through a Proxy: Up (client to server), Down (server to
// client), or Both.
type Direction uint8

const (
	// Up is from the client to the server.
	Up Direction = 1 << iota
	// Down is from the server to the client.
	Down
	// Both is Up and Down.
	Both = Up | Down
)

// String returns "up", "down" or "both".
func (d Direction) String() string {
	switch d {
	case Up:
		return "up"
	case Down:
		return "down"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// ways lists the single directions in d, as indexes into Proxy.ways.
func (d Direction) ways() []int {
	var out []int
	if d&Up != 0 {
		out = append(out, 0)
	}
	if d&Down != 0 {
		out = append(out, 1)
	}
	return out
}

// Proxy is a TCP proxy that fails on command, for tests of what a client does when the
// network between working parts fails: it stands between clients and a server (or between
// two replicas, see StartMeshCluster) and can delay, throttle, hang or blackhole either
// direction, drop its connections, refuse new ones, and let a request through but lose its
// reply. Heal ends every fault. Faults apply at once to the connections open and to new
// ones. Its methods are safe for concurrent use.
//
// A Proxy made with WithFraming(TigerBeetleFraming) knows where TigerBeetle's messages
// begin and end, so that LoseReplies loses exactly a reply (which a replica sends only
// after it applied the request); without it every chunk the server sends counts as a
// reply.
type Proxy struct {
	target  string
	ln      net.Listener
	framing Framing
	dial    time.Duration

	mu       sync.Mutex
	ways     [2]way // Up, Down
	refusing bool
	lose     int // replies still to lose
	links    map[*link]struct{}
	wake     chan struct{} // closed and replaced when a fault changes
	closed   bool
	wg       sync.WaitGroup

	accepted, refused, dropped, repliesLost atomic.Int64
	bytes                                   [2]atomic.Int64 // forwarded, per direction
}

// way is the faults of one direction.
type way struct {
	delay     time.Duration
	rate      int64 // bytes per second; 0: no limit
	hang      bool  // hold the bytes
	blackhole bool  // discard the bytes
}

// ProxyStats counts what a Proxy did since it started.
type ProxyStats struct {
	Accepted    int64 // connections accepted and forwarded
	Refused     int64 // connections closed at once while refusing
	Dropped     int64 // connections closed by Drop, Refuse, Heal (after a blackhole) or a lost reply
	RepliesLost int64 // replies discarded by LoseReplies
	Up, Down    int64 // bytes forwarded each way
}

// Framing splits the bytes a server sends into messages and tells replies from the rest.
type Framing interface {
	// Next returns the length of the first whole message at the start of b, or 0 if b
	// does not hold one yet.
	Next(b []byte) int
	// Reply reports whether message m, from the server, answers a request.
	Reply(m []byte) bool
}

// TigerBeetleFraming is TigerBeetle's wire format (0.17): a message is a 256-byte header,
// whose size field (u32 at byte 96) is the length of the whole message, and whose command
// (byte 114) is 8 for a reply.
var TigerBeetleFraming Framing = tigerBeetleFraming{}

type tigerBeetleFraming struct{}

const (
	tbHeaderSize   = 256
	tbSizeOffset   = 96
	tbCommandIndex = 114
	tbCommandReply = 8
	tbMessageMax   = 64 << 20
)

func (tigerBeetleFraming) Next(b []byte) int {
	if len(b) < tbHeaderSize {
		return 0
	}
	size := int(binary.LittleEndian.Uint32(b[tbSizeOffset:]))
	if size < tbHeaderSize || size > tbMessageMax {
		return len(b) // not TigerBeetle: pass it on as it is
	}
	if len(b) < size {
		return 0
	}
	return size
}

func (tigerBeetleFraming) Reply(m []byte) bool {
	return len(m) >= tbHeaderSize && m[tbCommandIndex] == tbCommandReply
}

// ProxyOption configures NewProxy.
type ProxyOption func(*proxyConfig)

type proxyConfig struct {
	listen  string
	framing Framing
}

// WithListen makes the proxy listen on addr instead of a free loopback port.
func WithListen(addr string) ProxyOption { return func(c *proxyConfig) { c.listen = addr } }

// WithFraming makes the proxy split what the server sends into f's messages (see Proxy).
func WithFraming(f Framing) ProxyOption { return func(c *proxyConfig) { c.framing = f } }

// NewProxy starts a proxy to target on a free loopback port (see WithListen). Close stops
// it; StartProxy closes it when a test ends.
func NewProxy(target string, opts ...ProxyOption) (*Proxy, error) {
	cfg := proxyConfig{listen: "127.0.0.1:0"}
	for _, o := range opts {
		o(&cfg)
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return nil, fmt.Errorf("testenv: proxy: %w", err)
	}
	p := &Proxy{target: target, ln: ln, framing: cfg.framing, dial: 2 * time.Second,
		links: map[*link]struct{}{}, wake: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// StartProxy starts a proxy to target for this test, closed when the test ends.
func StartProxy(t testing.TB, target string, opts ...ProxyOption) *Proxy {
	t.Helper()
	p, err := NewProxy(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Addr is where the proxy listens: give it to clients instead of the target's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Delay holds every byte going in dir for d before it is forwarded (0: none). Bytes keep
// their order; a link delayed both ways by d has a round trip 2d longer.
func (p *Proxy) Delay(dir Direction, d time.Duration) {
	p.change(dir, func(w *way) { w.delay = d })
}

// Throttle forwards at most bytesPerSecond bytes a second in dir on each connection (0: no
// limit).
func (p *Proxy) Throttle(dir Direction, bytesPerSecond int64) {
	p.change(dir, func(w *way) { w.rate = bytesPerSecond })
}

// Hang forwards nothing in dir and closes nothing, as a peer that stopped (SIGSTOP) or a
// stalled link would: what comes is held (once the buffers fill, the sender blocks) and
// forwarded, in order, when Heal ends the hang. New connections are accepted and hang too.
func (p *Proxy) Hang(dir Direction) { p.change(dir, func(w *way) { w.hang = true }) }

// Blackhole discards every byte going in dir and closes nothing, as a network that loses
// the packets of a link. A connection that lost bytes is broken: Heal closes it.
func (p *Proxy) Blackhole(dir Direction) { p.change(dir, func(w *way) { w.blackhole = true }) }

// Refuse closes every connection and, until Heal, each new one as soon as it is accepted
// (with a reset), as a peer that is gone would.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	p.refusing = true
	p.mu.Unlock()
	p.Drop()
}

// Drop closes the connections open now, with a reset; new ones are forwarded.
func (p *Proxy) Drop() {
	for _, l := range p.open(func(*link) bool { return true }) {
		l.close()
	}
}

// LoseReplies makes the proxy lose the next n replies (see Proxy): the request went
// through, the reply is discarded and its connection closed with a reset.
func (p *Proxy) LoseReplies(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lose = n
	p.notify()
}

// Heal ends every fault: no delay, no throttle, no hang, no blackhole, no refusal, no reply
// to lose. Held bytes are forwarded; connections that lost bytes to a blackhole are closed.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.ways = [2]way{}
	p.refusing = false
	p.lose = 0
	p.notify()
	p.mu.Unlock()
	for _, l := range p.open(func(l *link) bool { return l.broken.Load() }) {
		l.close()
	}
}

// Stats returns what the proxy did so far.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{Accepted: p.accepted.Load(), Refused: p.refused.Load(), Dropped: p.dropped.Load(),
		RepliesLost: p.repliesLost.Load(), Up: p.bytes[0].Load(), Down: p.bytes[1].Load()}
}

// Close stops listening, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Drop()
	p.wg.Wait()
}

// change applies f to the faults of each direction in dir.
func (p *Proxy) change(dir Direction, f func(*way)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, i := range dir.ways() {
		f(&p.ways[i])
	}
	p.notify()
}

// notify wakes the writers waiting for a fault to change; it requires that p.mu is held.
func (p *Proxy) notify() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// state returns the faults of direction i and the channel closed when they next change.
func (p *Proxy) state(i int) (way, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ways[i], p.wake
}

// open returns the open connections that pick selects.
func (p *Proxy) open(pick func(*link) bool) []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*link
	for l := range p.links {
		if pick(l) {
			out = append(out, l)
		}
	}
	return out
}

// takeLoss reports whether a reply is to be lost, and counts it.
func (p *Proxy) takeLoss() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lose == 0 {
		return false
	}
	p.lose--
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refusing, closed := p.refusing, p.closed
		p.mu.Unlock()
		if refusing || closed {
			p.refused.Add(1)
			reset(c)
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve forwards one connection until either side closes it or the proxy drops it.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, p.dial)
	if err != nil {
		reset(client)
		return
	}
	l := &link{p: p, conns: [2]net.Conn{client, server}, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		reset(client)
		reset(server)
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	p.accepted.Add(1)
	var wg sync.WaitGroup
	for i := range 2 {
		chunks := make(chan chunk, 64)
		wg.Go(func() { l.read(i, chunks) })
		wg.Go(func() { l.write(i, chunks) })
	}
	wg.Wait()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// reset closes c at once, with a TCP reset rather than an orderly close.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// link is one proxied connection: conns[0] the client's, conns[1] the server's.
type link struct {
	p      *Proxy
	conns  [2]net.Conn
	done   chan struct{} // closed by close
	once   sync.Once
	broken atomic.Bool // bytes were discarded: the stream is no longer whole
}

// chunk is bytes read in one direction, and when.
type chunk struct {
	data []byte
	at   time.Time
}

// close closes both sides with a reset, once, and counts a drop unless the peers closed
// first.
func (l *link) close() {
	l.once.Do(func() {
		l.p.dropped.Add(1) // before a peer can see it
		close(l.done)
		reset(l.conns[0])
		reset(l.conns[1])
	})
}

// end closes both sides after a peer closed its side: not a drop.
func (l *link) end() {
	l.once.Do(func() {
		close(l.done)
		l.conns[0].Close()
		l.conns[1].Close()
	})
}

// read reads direction i (0: from the client, 1: from the server) into chunks, whole
// messages if the proxy has a framing and i is 1, until its side closes.
func (l *link) read(i int, chunks chan<- chunk) {
	defer close(chunks)
	src := l.conns[i]
	framing := l.p.framing
	if i == 0 {
		framing = nil
	}
	var pending []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			at := time.Now()
			if framing == nil {
				if !l.send(chunks, chunk{append([]byte(nil), buf[:n]...), at}) {
					return
				}
			} else {
				pending = append(pending, buf[:n]...)
				for {
					m := framing.Next(pending)
					if m == 0 {
						break
					}
					if !l.send(chunks, chunk{append([]byte(nil), pending[:m]...), at}) {
						return
					}
					pending = pending[m:]
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *link) send(chunks chan<- chunk, c chunk) bool {
	select {
	case chunks <- c:
		return true
	case <-l.done:
		return false
	}
}

// write forwards direction i's chunks to the other side, applying the faults of the
// moment; when the reader is done it closes the link.
func (l *link) write(i int, chunks <-chan chunk) {
	dst := l.conns[1-i]
	var next time.Time // throttle: when the next byte may go
	for c := range chunks {
		w, ok := l.due(i, c.at)
		if !ok {
			return
		}
		if w.blackhole {
			l.broken.Store(true)
			continue
		}
		if i == 1 && (l.p.framing == nil || l.p.framing.Reply(c.data)) && l.p.takeLoss() {
			l.p.repliesLost.Add(1) // counted, as the drop is, before the peer sees it
			l.close()
			return
		}
		if !l.forward(i, dst, c.data, &next) {
			return
		}
	}
	l.end()
}

// due waits until a chunk read at `at` may go in direction i: while the direction hangs,
// and until its delay passed. It returns the faults it may go under, or false if the link
// closed meanwhile.
func (l *link) due(i int, at time.Time) (way, bool) {
	for {
		w, wake := l.p.state(i)
		wait := time.Until(at.Add(w.delay))
		if !w.hang && wait <= 0 {
			return w, true
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if !w.hang {
			timer = time.NewTimer(wait)
			fire = timer.C
		}
		select {
		case <-wake:
		case <-fire:
		case <-l.done:
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-l.done:
			return w, false
		default:
		}
	}
}

// forward writes b to dst, in pieces no faster than the direction's throttle of the
// moment.
func (l *link) forward(i int, dst net.Conn, b []byte, next *time.Time) bool {
	for len(b) > 0 {
		w, _ := l.p.state(i)
		piece := b
		if w.rate > 0 {
			piece = b[:min(len(b), max(int(w.rate/50), 1))]
			if wait := time.Until(*next); wait > 0 {
				select {
				case <-time.After(wait):
				case <-l.done:
					return false
				}
			}
			*next = later(*next, time.Now()).Add(time.Duration(float64(len(piece)) / float64(w.rate) * float64(time.Second)))
		}
		l.p.bytes[i].Add(int64(len(piece))) // before the peer can answer
		if _, err := dst.Write(piece); err != nil {
			l.close()
			return false
		}
		b = b[len(piece):]
	}
	return true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
