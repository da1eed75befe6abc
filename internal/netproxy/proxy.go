// Package netproxy is a TCP proxy for tests: it sits between two nodes and
// can be told to stop forwarding, cutting one node off the network while
// both processes keep running.
package netproxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds a connection attempt to the target, so a dead target
// cannot hold an accepted connection (and Close) for long.
const dialTimeout = 5 * time.Second

// Proxy forwards every connection made to Addr to its target.
type Proxy struct {
	ln     net.Listener
	target string

	mu          sync.Mutex
	partitioned bool
	// swallow: replies are not passed on; the first bytes of one close
	// both sides (the request reached the target, its answer is lost).
	swallow bool
	// marker, when set: the next request bytes holding it turn swallow on
	// (a protocol whose ends speak unasked, as HTTP/2's pings, would
	// otherwise lose its connection before the request is sent).
	marker []byte
	closed bool
	// delay holds each chunk of bytes, either way, this long before it is
	// passed on (SetDelay): a slow link.
	delay time.Duration
	// arming is held while request bytes holding the marker are written
	// to the target: a reply read meanwhile (the target can answer before
	// the write returns) waits for the swallow to be armed.
	arming sync.Mutex
	conns  map[net.Conn]struct{} // every open connection, both sides
	wg     sync.WaitGroup        // the accept loop and every forwarding goroutine
}

// New listens on 127.0.0.1 at a port the system picks and forwards to
// target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address to connect to instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Partition stops forwarding in both directions: open connections are
// dropped, and connections made until Heal are accepted and dropped at
// once, as a peer whose packets vanish is eventually reset.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partitioned = true
	p.dropLocked()
}

// SwallowReplies, on, forwards requests as before but no reply: the first
// bytes of a reply on any connection close it, so the client saw its
// request written and then the connection break, as when a peer dies
// between doing a thing and answering it. Off, replies pass again.
func (p *Proxy) SwallowReplies(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.swallow = on
}

// SwallowReplyTo swallows the replies that come after the next request
// bytes holding marker pass: that request reaches the target, its answer
// is lost.
func (p *Proxy) SwallowReplyTo(marker string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker = []byte(marker)
}

// requestPassed turns swallowing on when b holds the marker.
func (p *Proxy) requestPassed(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.marker != nil && bytes.Contains(b, p.marker) {
		p.marker, p.swallow = nil, true
	}
}

// marks reports whether b holds the marker SwallowReplyTo set.
func (p *Proxy) marks(b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.marker != nil && bytes.Contains(b, p.marker)
}

func (p *Proxy) swallowing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.swallow
}

// SetDelay holds every chunk of bytes passed on, either way, for d (0:
// none) from now on: a slow or congested link. Chunks wait one after
// another, so a busy connection falls further behind than d.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// hold waits out the delay, if any.
func (p *Proxy) hold() {
	p.mu.Lock()
	d := p.delay
	p.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
}

// Heal forwards new connections again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partitioned = false
}

// Close stops listening, drops every connection and waits for the
// forwarding goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	err := p.ln.Close()
	p.dropLocked()
	p.mu.Unlock()
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("netproxy: close: %w", err)
	}
	return nil
}

// dropLocked closes every open connection; p.mu is held.
func (p *Proxy) dropLocked() {
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// track registers c as open, or reports false (and closes c) when the
// proxy is partitioned or closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.partitioned || p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target for client and copies both ways until both
// directions end or the connection is dropped.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	server, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	var both sync.WaitGroup
	both.Go(func() { p.pipeRequests(server, client) })
	p.pipeReplies(client, server)
	both.Wait()
}

// pipeReplies copies the target's replies to the client until the proxy
// swallows them: then a reply's arrival closes the client's side, while
// the target's side stays open and is drained for a while — the target
// finishes what it received as if the answer were lost on the way, not
// told by a closed connection that its caller left.
func (p *Proxy) pipeReplies(client, server net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			// A barrier: a marked request being written arms first.
			p.arming.Lock()
			//lint:ignore SA2001 the lock is a barrier, not a guard: nothing is read under it
			p.arming.Unlock()
			if p.swallowing() {
				_ = client.Close()
				_ = server.SetReadDeadline(time.Now().Add(drainFor))
				_, _ = io.Copy(io.Discard, server)
				_ = server.Close()
				return
			}
			p.hold()
			if _, werr := client.Write(buf[:n]); werr != nil {
				_ = client.Close()
				_ = server.Close()
				return
			}
		}
		if err != nil {
			if tc, ok := client.(*net.TCPConn); ok && err == io.EOF {
				_ = tc.CloseWrite()
				return
			}
			_ = client.Close()
			_ = server.Close()
			return
		}
	}
}

// drainFor is how long a swallowing proxy keeps the target's side of a
// connection open after closing the client's.
const drainFor = 10 * time.Second

// pipeRequests copies the client's bytes to the target, arming the swallow
// (SwallowReplyTo) only once the marked bytes are written to the target:
// armed earlier, a reply already on its way (an HTTP/2 ack) could close
// the connection before the marked request reaches the target. It then
// passes the end of the stream on (a half-close), so a client that shuts
// its writing side still reads the answers. A copy that fails (a drop, a
// reset) ends both sides — but the target's side of a swallowed
// connection, which pipeReplies drains and closes.
func (p *Proxy) pipeRequests(server, client net.Conn) {
	_, err := io.Copy(armingWriter{server, p}, client)
	if tc, ok := server.(*net.TCPConn); ok && err == nil {
		_ = tc.CloseWrite()
		return
	}
	_ = client.Close()
	if !p.swallowing() {
		_ = server.Close()
	}
}

// armingWriter is dst telling the proxy that request bytes were passed on.
type armingWriter struct {
	net.Conn
	p *Proxy
}

func (w armingWriter) Write(b []byte) (int, error) {
	w.p.hold()
	if w.p.marks(b) {
		w.p.arming.Lock()
		defer w.p.arming.Unlock()
	}
	n, err := w.Conn.Write(b)
	if n > 0 {
		w.p.requestPassed(b[:n])
	}
	return n, err
}
