package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/rls"
)

// DoorLimits bound the HTTP and gRPC listeners: how many connections each
// holds at once and how long an idle or slow one may stay. Anyone who can
// reach those ports, authenticated or not, could otherwise hold every file
// descriptor the process has and lock RESP clients out; with these, the
// descriptors RESP's maxclients needs are never theirs (fitMaxClients
// budgets all three).
type DoorLimits struct {
	// HTTPMaxConns is the most HTTP connections open at once (default
	// 256); at the cap, a new one takes the place of the one silent
	// longest.
	HTTPMaxConns int
	// HTTPIdleTimeout closes a keep-alive connection that sends no new
	// request for this long (default 60 s).
	HTTPIdleTimeout time.Duration
	// HTTPReadTimeout bounds reading one request, headers and body
	// (default 10 s): a body trickled byte by byte is cut off.
	HTTPReadTimeout time.Duration
	// HTTPWriteTimeout bounds writing one response (default 60 s: a 30 s
	// CPU profile from /debug/pprof/profile fits).
	HTTPWriteTimeout time.Duration
	// GRPCMaxConns is the most gRPC connections open at once (default
	// 4096: an Envoy fleet holds one or a few each); at the cap, a new one
	// takes the place of the one silent longest.
	GRPCMaxConns int
	// GRPCHandshakeTimeout bounds a new connection's HTTP/2 handshake
	// (default 5 s).
	GRPCHandshakeTimeout time.Duration
	// GRPCIdleTimeout closes a connection with no call in flight for this
	// long (default 5 min; Envoy dials again when it next needs one).
	GRPCIdleTimeout time.Duration
	// GRPCReadTimeout bounds how long a call may take, after its headers,
	// to send its request message (default 10 s): past it (found within a
	// quarter of it) the connection is closed.
	GRPCReadTimeout time.Duration
	// GRPCMaxStreams is the most calls in flight on one gRPC connection
	// (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; default 1024).
	GRPCMaxStreams int
}

// DefaultDoorLimits are the limits sluice runs with unless told.
func DefaultDoorLimits() DoorLimits {
	return DoorLimits{HTTPMaxConns: 256, HTTPIdleTimeout: time.Minute, HTTPReadTimeout: 10 * time.Second,
		HTTPWriteTimeout: time.Minute, GRPCMaxConns: 4096, GRPCHandshakeTimeout: 5 * time.Second,
		GRPCIdleTimeout: 5 * time.Minute, GRPCReadTimeout: 10 * time.Second, GRPCMaxStreams: 1024}
}

// Validate reports the first limit that cannot work.
func (d DoorLimits) Validate() error {
	if d.GRPCMaxStreams < 1 || d.GRPCMaxStreams > 1<<20 {
		return fmt.Errorf("%w: --grpc-max-streams %d: want 1 to 1048576", ErrConfig, d.GRPCMaxStreams)
	}
	if d.HTTPMaxConns < 1 || d.GRPCMaxConns < 1 {
		return fmt.Errorf("%w: --http-max-conns (%d) and --grpc-max-conns (%d) must be at least 1", ErrConfig, d.HTTPMaxConns, d.GRPCMaxConns)
	}
	for _, t := range []struct {
		flag string
		v    time.Duration
	}{{"http-idle-timeout", d.HTTPIdleTimeout}, {"http-read-timeout", d.HTTPReadTimeout}, {"http-write-timeout", d.HTTPWriteTimeout},
		{"grpc-handshake-timeout", d.GRPCHandshakeTimeout}, {"grpc-idle-timeout", d.GRPCIdleTimeout},
		{"grpc-read-timeout", d.GRPCReadTimeout}} {
		if t.v < time.Millisecond {
			return fmt.Errorf("%w: --%s %s: want at least 1ms (a door without timeouts can be held open by anyone)", ErrConfig, t.flag, t.v)
		}
	}
	return nil
}

// cappedListener holds at most max connections open at once. When a new
// one arrives at the cap, the connection that has sent nothing for the
// longest among those not busy is closed to make room: a flood of idle
// connections (keep-alive left open, a gRPC preface and nothing after it)
// cannot lock out a client that is talking, and the descriptors held never
// pass the cap. A busy connection — one whose request is being read or
// decided (see cappedConn.state) — is never closed: its caller would not
// know whether it was charged. The HTTP door marks a connection busy from
// the first byte of a request until its response is written; the gRPC
// door while it has a call in flight (its guard counts them, callBegins). When every connection is
// busy, the new one is refused instead (refuse: HTTP answers it 503 with
// Retry-After).
type cappedListener struct {
	net.Listener
	max int
	// refuse turns a connection away at the cap when none can be closed;
	// with it nil no connection counts as busy (see cappedConn.state).
	refuse func(net.Conn)

	mu    sync.Mutex
	conns map[*cappedConn]struct{}
	// byAddr finds a connection by its peer's address value (the one
	// RemoteAddr returns, which grpc-go hands on as the call's peer),
	// without formatting it: a lookup per call (callBegins, closeRemote).
	byAddr sync.Map
	// evicted counts connections closed to make room for a new one;
	// refused those turned away because every connection was busy.
	evicted, refused atomic.Int64
	// refusing counts the refusals under way: each holds a descriptor for
	// up to a second, so past maxRefusing a connection is closed at once.
	refusing atomic.Int64
}

// maxRefusing bounds the refusals answered at once.
const maxRefusing = 16

// turnAway refuses c (see refuse) off the accept loop, or closes it when
// enough refusals are under way.
func (l *cappedListener) turnAway(c net.Conn) {
	if l.refuse == nil || l.refusing.Add(1) > maxRefusing {
		if l.refuse != nil {
			l.refusing.Add(-1)
		}
		c.Close()
		return
	}
	go func() {
		defer l.refusing.Add(-1)
		l.refuse(c)
	}()
}

func newCappedListener(ln net.Listener, max int) *cappedListener {
	return &cappedListener{Listener: ln, max: max, conns: make(map[*cappedConn]struct{}, max)}
}

func (l *cappedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cc := &cappedConn{Conn: c, l: l}
		cc.lastRead.Store(time.Now().UnixNano())
		var victim *cappedConn
		l.mu.Lock()
		if len(l.conns) >= l.max {
			victim = l.victim()
			if victim == nil {
				l.mu.Unlock()
				l.refused.Add(1)
				l.turnAway(c)
				continue
			}
			l.forget(victim)
		}
		l.conns[cc] = struct{}{}
		l.byAddr.Store(c.RemoteAddr(), cc)
		l.mu.Unlock()
		if victim != nil {
			l.evicted.Add(1)
			victim.Conn.Close()
		}
		return cc, nil
	}
}

// victim is the connection silent longest among those not busy, marked
// evicted, or nil. l.mu is held.
func (l *cappedListener) victim() *cappedConn {
	var busy map[*cappedConn]bool // found busy on a second look
	now := time.Now().UnixNano()
	for {
		var victim *cappedConn
		for o := range l.conns {
			if o.state.Load() != connIdle || o.busyWithCalls(now) || busy[o] {
				continue
			}
			if victim == nil || o.lastRead.Load() < victim.lastRead.Load() {
				victim = o
			}
		}
		if victim == nil {
			return nil
		}
		// It may have read a request, or begun a call, since: then look
		// again. A call that begins after the mark sees it (callBegins).
		if victim.state.CompareAndSwap(connIdle, connEvicted) {
			if !victim.busyWithCalls(now) {
				return victim
			}
			victim.state.Store(connIdle)
		}
		if busy == nil {
			busy = map[*cappedConn]bool{}
		}
		busy[victim] = true
	}
}

// callBegins counts a call on the connection from remote (the gRPC door's
// guard asks, per call) and returns the connection, to End the call; nil
// when the listener holds no such connection. closing: the connection is
// being closed for a newer one, and the call must not start on it.
func (l *cappedListener) callBegins(remote net.Addr) (call rls.Call, closing bool) {
	v, ok := l.byAddr.Load(remote)
	if !ok {
		return nil, false
	}
	c := v.(*cappedConn)
	c.inflight.Add(1)
	if c.state.Load() == connEvicted {
		c.inflight.Add(-1)
		return nil, true
	}
	return c, false
}

// End takes a call off the connection's count. Its answer is written after
// the handler returns, so the connection stays busy for answerGrace more.
func (c *cappedConn) End() {
	c.lastCall.Store(time.Now().UnixNano())
	c.inflight.Add(-1)
}

// answerGrace is how long after a call's handler returned its connection
// still counts as busy: grpc-go writes the answer after, from its own
// goroutine.
const answerGrace = time.Second

// busyWithCalls reports a connection with a call in flight or just answered.
func (c *cappedConn) busyWithCalls(now int64) bool {
	return c.inflight.Load() > 0 || now-c.lastCall.Load() < int64(answerGrace)
}

// open is how many connections the listener holds.
func (l *cappedListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// cappedConn notes when it last read anything and whether a request is
// under way, and leaves its listener's set when closed.
type cappedConn struct {
	net.Conn
	l        *cappedListener
	lastRead atomic.Int64
	// inflight counts the gRPC calls under way on it (callBegins), and
	// lastCall is when the last one's handler returned (Unix ns): a
	// connection with one, or one just answered, is busy.
	inflight, lastCall atomic.Int64
	// state is connIdle, connBusy or connEvicted. A read that brings bytes
	// makes an idle connection busy; the HTTP server makes it idle again
	// once the response is written (markIdle). Eviction takes only an
	// idle one, and a read that finds its connection evicted returns no
	// bytes: no request reaches a handler on a connection being closed.
	state atomic.Int32
}

const (
	connIdle int32 = iota
	connBusy
	connEvicted
)

func (c *cappedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		if c.l.refuse != nil && !c.state.CompareAndSwap(connIdle, connBusy) && c.state.Load() == connEvicted {
			return 0, io.EOF // closed for a newer connection: read as the peer gone, not as a bad request
		}
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *cappedConn) Close() error {
	c.l.mu.Lock()
	c.l.forget(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// forget takes c out of the listener's sets; l.mu is held.
func (l *cappedListener) forget(c *cappedConn) {
	delete(l.conns, c)
	l.byAddr.CompareAndDelete(c.RemoteAddr(), c)
}

// closeRemote closes the connection from remote, if the listener holds
// one (the gRPC guard's cut of a client whose stream sent no request).
func (l *cappedListener) closeRemote(remote net.Addr) bool {
	v, ok := l.byAddr.Load(remote)
	if !ok {
		return false
	}
	v.(*cappedConn).Close()
	return true
}

// markIdle is an http.Server's ConnState hook: a connection is busy from
// the first byte of a request it reads until its response is written.
func markIdle(nc net.Conn, st http.ConnState) {
	if c, ok := nc.(*cappedConn); ok {
		switch st {
		case http.StateIdle:
			c.state.CompareAndSwap(connBusy, connIdle)
		case http.StateActive: // a request already buffered
			c.state.CompareAndSwap(connIdle, connBusy)
		}
	}
}

// refuseHTTP answers a connection the HTTP door cannot take 503 with
// Retry-After, after reading what request it sent, so the caller knows
// nothing was done.
func refuseHTTP(c net.Conn) {
	c.SetDeadline(time.Now().Add(time.Second))
	c.Read(make([]byte, 4096))
	c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 45\r\n\r\nsluice: too many HTTP connections; try again\n"))
	closeAfterReply(c)
}
