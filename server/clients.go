package server

import (
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-rl/sluice/commands"
)

// clientRegistry is the set of open connections, for CLIENT LIST and
// CLIENT KILL (commands.Clients). It also keeps a coarse wall clock, in
// whole seconds, so recording each command's time costs one atomic load
// instead of a clock read.
type clientRegistry struct {
	mu    sync.Mutex
	conns map[int64]*connState
	// closed is set by closeAll: connections that register later are
	// turned away.
	closed bool
	// unix is the wall clock in seconds, refreshed by tick.
	unix atomic.Int64
	// connected is INFO's connected_clients, which every registered
	// connection counts in until it is killed or dropped (uncount).
	connected *atomic.Int64
}

// connReg is what the registry reads of a connection from other
// goroutines. The connection's loop (or the goroutine it handed the
// connection to) writes it after each command,
// touching the atomics only when a value changed, so a pipeline of one
// command costs no atomic store at all.
type connReg struct {
	nc      net.Conn
	fd      int
	created int64 // wall clock, Unix seconds
	// lastActive is when the last command ran (Unix seconds); lastCmd is
	// that command.
	lastActive atomic.Int64
	lastCmd    atomic.Pointer[commands.Command]
	// killed is set by CLIENT KILL from another connection: the socket is
	// closed and no further command of this connection runs.
	killed atomic.Bool
	// uncounted: the connection left connected_clients (see uncount).
	uncounted atomic.Bool
	// unauthenticated: the connection is in Server.unauthenticated (a
	// password is set and it has not given it; preauth.go).
	unauthenticated atomic.Bool
	// requestBytes is the read buffer counted in Server.clientBytes: a
	// large request being received (clientmem.go).
	requestBytes atomic.Int64

	seenCmd *commands.Command
	seenAt  int64
}

func (r *clientRegistry) init(connected *atomic.Int64) {
	r.connected = connected
	r.conns = map[int64]*connState{}
	r.unix.Store(time.Now().Unix())
}

// tick refreshes the coarse clock, and calls each (the idle sweep), until
// stop closes.
func (r *clientRegistry) tick(stop <-chan struct{}, done func(), each func()) {
	defer done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			r.unix.Store(now.Unix())
			each()
		}
	}
}

// add registers a connection; false means the server is shutting down.
func (r *clientRegistry) add(cs *connState, nc net.Conn) bool {
	cs.reg.nc = nc
	cs.reg.fd = socketFD(nc)
	now := r.unix.Load()
	cs.reg.created = now
	cs.reg.lastActive.Store(now)
	cs.reg.seenAt = now
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[cs.conn.ID] = cs
	return true
}

// closeAll closes every connection's socket, for shutdown; each
// connection's loop then sees it end and cleans up.
func (r *clientRegistry) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, cs := range r.conns {
		cs.reg.nc.Close()
	}
}

// uncount takes a registered connection out of connected_clients, once:
// when it is killed or when its loop drops it, whichever comes first.
func (r *clientRegistry) uncount(cs *connState) {
	if cs.reg.uncounted.CompareAndSwap(false, true) {
		r.connected.Add(-1)
	}
}

func (r *clientRegistry) remove(cs *connState) {
	r.mu.Lock()
	delete(r.conns, cs.conn.ID)
	r.mu.Unlock()
}

// touch records a command the connection ran; only whoever runs the
// connection's commands calls it.
func (r *clientRegistry) touch(cs *connState) {
	reg := &cs.reg
	if cmd := cs.ctx.Command(); cmd != nil && cmd != reg.seenCmd {
		reg.seenCmd = cmd
		reg.lastCmd.Store(cmd)
	}
	if now := r.unix.Load(); now != reg.seenAt {
		reg.seenAt = now
		reg.lastActive.Store(now)
	}
}

func (r *clientRegistry) snapshot() []*connState {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*connState, 0, len(r.conns))
	for _, cs := range r.conns {
		out = append(out, cs)
	}
	slices.SortFunc(out, func(a, b *connState) int { return int(a.conn.ID - b.conn.ID) })
	return out
}

func (r *clientRegistry) info(cs *connState) commands.ClientInfo {
	ci := cs.conn.Snapshot()
	now := r.unix.Load()
	ci.FD = cs.reg.fd
	ci.Age = max(0, now-cs.reg.created)
	ci.Idle = max(0, now-cs.reg.lastActive.Load())
	ci.OutputBytes = int64(cs.out.queuedBytes())
	if cmd := cs.reg.lastCmd.Load(); cmd != nil {
		ci.LastCmd = cmd.FullName()
	}
	return ci
}

// List implements commands.Clients.
func (r *clientRegistry) List() []commands.ClientInfo {
	conns := r.snapshot()
	out := make([]commands.ClientInfo, 0, len(conns))
	for _, cs := range conns {
		if !cs.reg.killed.Load() {
			out = append(out, r.info(cs))
		}
	}
	return out
}

// Kill implements commands.Clients. Closing the socket is safe from any
// goroutine; the connection's loop then sees it end and cleans up.
func (r *clientRegistry) Kill(match func(*commands.ClientInfo) bool) int {
	n := 0
	for _, cs := range r.snapshot() {
		if cs.reg.killed.Load() {
			continue
		}
		ci := r.info(cs)
		if !match(&ci) {
			continue
		}
		if cs.reg.killed.CompareAndSwap(false, true) {
			cs.reg.nc.Close()
			// Gone from CLIENT LIST, so from connected_clients too, even
			// while a command it started still runs aside.
			r.uncount(cs)
			n++
		}
	}
	return n
}

// socketFD is the connection's file descriptor for CLIENT LIST, or -1.
func socketFD(nc net.Conn) int {
	if t, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = t.NetConn() // TLS
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	raw.Control(func(f uintptr) { fd = int(f) })
	return fd
}
