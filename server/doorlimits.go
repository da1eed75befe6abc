package server

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
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
	// to send its request message (default 10 s): a stream that sends
	// headers and nothing else is ended, and then its connection idles
	// out.
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
// longest is closed to make room: a flood of idle connections (keep-alive
// left open, a gRPC preface and nothing after it) cannot lock out a client
// that is talking, and the descriptors held never pass the cap.
type cappedListener struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns map[*cappedConn]struct{}
	// evicted counts connections closed to make room for a new one.
	evicted atomic.Int64
}

func newCappedListener(ln net.Listener, max int) *cappedListener {
	return &cappedListener{Listener: ln, max: max, conns: make(map[*cappedConn]struct{}, max)}
}

func (l *cappedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &cappedConn{Conn: c, l: l}
	cc.lastRead.Store(time.Now().UnixNano())
	var victim *cappedConn
	l.mu.Lock()
	if len(l.conns) >= l.max {
		for o := range l.conns {
			if victim == nil || o.lastRead.Load() < victim.lastRead.Load() {
				victim = o
			}
		}
		delete(l.conns, victim)
	}
	l.conns[cc] = struct{}{}
	l.mu.Unlock()
	if victim != nil {
		l.evicted.Add(1)
		victim.Conn.Close()
	}
	return cc, nil
}

// open is how many connections the listener holds.
func (l *cappedListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// cappedConn notes when it last read anything, and leaves its listener's
// set when closed.
type cappedConn struct {
	net.Conn
	l        *cappedListener
	lastRead atomic.Int64
}

func (c *cappedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *cappedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
