// Package raftmux carries a process's member traffic over one TCP port:
// the Raft of each group it hosts a member of (three machines, three
// groups, one leader each), and the member calls of package member. Each
// connection opens with a header naming its purpose; the mux hands it to
// that purpose's Layer — a group's raft.StreamLayer, which a
// hashicorp/raft NetworkTransport takes in place of a TCP listener of its
// own, or a group's member-call listener.
//
// The header is one byte of length and the group's id (1 to 255 bytes)
// for Raft; a zero byte, then the same, for member calls — the form every
// release since 0.4.0 sends, version 1 by its shape. A versioned header
// is two zero bytes, its version, its purpose (0 Raft, 1 member calls),
// then the length and the group's id: a mux accepts it at HeaderVersion
// and refuses (closes, counted as bad_version) a version it does not
// know. A member sends the versioned form only when Guard.VersionedHeader
// says every member of the cluster accepts it (0.4.0 closes it): accept
// first, send in the release after. A connection that does not send its
// header within HeaderTimeout, or names a group this process does not
// host, is closed. With a cluster secret, both ends then
// prove they hold it (package memberauth, bound to the purpose) before
// anything behind the mux hears a byte; with TLS (Guard), the connection
// is then encrypted, Raft and member calls alike.
package raftmux

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluice-rl/sluice/memberauth"
)

// HeaderTimeout bounds how long a dialed connection may take to send its
// header when the dialer gave no deadline.
const HeaderTimeout = 5 * time.Second

// HeaderVersion is the version of the versioned header this mux reads
// and sends.
const HeaderVersion = 1

// Errors.
var (
	// ErrClosed: the mux or the layer is closed.
	ErrClosed = errors.New("raftmux: closed")
	// ErrGroup: a group id that cannot be a header (empty, over 255
	// bytes), or one asked for twice.
	ErrGroup = errors.New("raftmux: bad group")
	// ErrVersion: a versioned header of a version this member does not
	// read (a newer member's).
	ErrVersion = errors.New("raftmux: a header version this member does not read")
)

// Kind is what a connection carries.
type Kind byte

const (
	// Raft is a group's Raft traffic.
	Raft Kind = iota
	// Member is calls between members (package member).
	Member
)

// route is where a connection goes: a kind and a group.
type route struct {
	kind  Kind
	group string
}

// Guard is how a member port's connections are kept to members: the
// cluster's secret proves membership (nil: the network is trusted), TLS
// keeps the traffic private (nil: plain TCP). ServerTLS encrypts the
// connections a mux accepts, ClientTLS those dialed (its ServerName, if
// empty, is the dialed host).
type Guard struct {
	Secret               []byte
	ServerTLS, ClientTLS *tls.Config
	// VersionedHeader sends the versioned header (HeaderVersion) on
	// dialed connections: only once no member of 0.4.0 is left, which
	// closes it. Accepted connections may use either form.
	VersionedHeader bool
	// Limits bound the connections a mux accepts (zero fields: the
	// defaults).
	Limits Limits
}

// Limits bound a member port's connections, so a stranger — with or
// without the cluster's secret — cannot take the descriptors the client
// doors need, nor make Raft allocate a transport buffer for a connection
// that has not shown it carries anything.
type Limits struct {
	// MaxConns is how many connections the port holds at once, pending
	// or serving (DefaultMaxConns). Past it, an accepted connection is
	// closed at once, before anything is read or allocated for it.
	MaxConns int
	// MaxPending is how many of them may be pending at once: accepted and
	// not yet through their header, proof, TLS and first byte
	// (DefaultMaxPending).
	MaxPending int
	// Handshake bounds how long a connection may stay pending
	// (DefaultHandshake).
	Handshake time.Duration
}

// The default limits: a member of a thousand-group cluster is called by
// every other group's members (a connection each for member calls) and
// its own group's (Raft's pool); the handshake is a few round trips.
const (
	DefaultMaxConns   = 4096
	DefaultMaxPending = 256
	DefaultHandshake  = 3 * time.Second
)

// withDefaults fills l's zero fields.
func (l Limits) withDefaults() Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxPending <= 0 {
		l.MaxPending = DefaultMaxPending
	}
	l.MaxPending = min(l.MaxPending, l.MaxConns)
	if l.Handshake <= 0 {
		l.Handshake = DefaultHandshake
	}
	return l
}

// Validate reports limits that cannot be: negative ones.
func (l Limits) Validate() error {
	if l.MaxConns < 0 || l.MaxPending < 0 || l.Handshake < 0 {
		return fmt.Errorf("raftmux: negative connection limits %+v", l)
	}
	return nil
}

// Mux is one member port shared by groups and purposes.
type Mux struct {
	ln    net.Listener
	guard Guard
	// advertise is the address the layers name (nil: the listener's).
	advertise net.Addr
	log       *slog.Logger
	mu        sync.Mutex
	layers    map[route]*Layer
	done      chan struct{}
	wg        sync.WaitGroup
	limits    Limits
	// maxConns is limits.MaxConns, lowered by SetMaxConns.
	maxConns atomic.Int64
	// open and pending count the connections held (limits); raft those
	// carrying Raft, either way (RaftBufferBytes).
	open, pending, raft atomic.Int64
	refusals            refusals
}

// Listen listens for Raft on addr; secret (nil: none) is the cluster's,
// which every connection must prove (memberauth.Check must hold).
func Listen(addr string, secret []byte, log *slog.Logger) (*Mux, error) {
	return ListenAs(addr, nil, Guard{Secret: secret}, log)
}

// NamedAddr is a member port's address as a cluster map names it, a
// host name left unresolved (it may resolve only once the member is up).
type NamedAddr string

// Network is "tcp".
func (a NamedAddr) Network() string { return "tcp" }

// String is the address as named.
func (a NamedAddr) String() string { return string(a) }

// ListenAs is Listen whose layers name advertise as their address (nil:
// the listener's): the address the group's Raft configuration knows this
// member by.
func ListenAs(addr string, advertise net.Addr, guard Guard, log *slog.Logger) (*Mux, error) {
	if guard.Secret != nil {
		if err := memberauth.Check(guard.Secret); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raftmux: listen on %s: %w", addr, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := guard.Limits.Validate(); err != nil {
		ln.Close()
		return nil, err
	}
	m := &Mux{ln: ln, guard: guard, advertise: advertise, log: log, layers: map[route]*Layer{}, done: make(chan struct{}),
		limits: guard.Limits.withDefaults()}
	m.maxConns.Store(int64(m.limits.MaxConns))
	m.wg.Add(1)
	go m.serve()
	return m, nil
}

// Addr is the address the mux listens on.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Layer is group's Raft stream layer on this mux (one per group).
func (m *Mux) Layer(group string) (*Layer, error) { return m.layer(Raft, group) }

// Members is the listener of group's member calls on this mux (one per
// group): connections that named the group and, with a secret, proved
// membership.
func (m *Mux) Members(group string) (*Layer, error) { return m.layer(Member, group) }

func (m *Mux) layer(kind Kind, group string) (*Layer, error) {
	if group == "" || len(group) > 255 {
		return nil, fmt.Errorf("%w: %q", ErrGroup, group)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := route{kind, group}
	if _, dup := m.layers[r]; dup {
		return nil, fmt.Errorf("%w: group %s has a layer already", ErrGroup, group)
	}
	l := &Layer{mux: m, route: r, conns: make(chan net.Conn), closed: make(chan struct{})}
	m.layers[r] = l
	return l, nil
}

// Close stops listening; the layers' Accept return ErrClosed.
func (m *Mux) Close() error {
	select {
	case <-m.done:
		return nil
	default:
	}
	close(m.done)
	err := m.ln.Close()
	m.wg.Wait()
	return err
}

func (m *Mux) serve() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			m.refusals.note(m.log, refusedAccept, nil)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		// Over a limit the connection is closed here, before a goroutine
		// or a byte is spent on it.
		switch {
		case m.open.Load() >= m.maxConns.Load():
			m.refusals.note(m.log, refusedFull, c.RemoteAddr())
			c.Close()
			continue
		case m.pending.Load() >= int64(m.limits.MaxPending):
			m.refusals.note(m.log, refusedPending, c.RemoteAddr())
			c.Close()
			continue
		}
		m.open.Add(1)
		m.pending.Add(1)
		go m.route(&heldConn{Conn: c, open: &m.open})
	}
}

// SetMaxConns changes how many connections the mux holds at once (the
// server fits it into the open-files limit beside the client doors).
func (m *Mux) SetMaxConns(n int) { m.maxConns.Store(int64(max(n, 1))) }

// Conns are the connections the mux holds, and of them those pending.
func (m *Mux) Conns() (open, pending int64) { return m.open.Load(), m.pending.Load() }

// route takes c through its header, proof and TLS, and its first byte,
// within the handshake deadline, and hands it to its group's layer.
func (m *Mux) route(c net.Conn) {
	pending := true
	defer func() {
		if pending {
			m.pending.Add(-1)
		}
	}()
	deadline := time.Now().Add(m.limits.Handshake)
	c.SetDeadline(deadline)
	r, err := readHeader(c)
	if errors.Is(err, ErrVersion) {
		m.refusals.note(m.log, refusedVersion, c.RemoteAddr())
		c.Close()
		return
	}
	if err != nil {
		m.refusals.note(m.log, refusedHeader, c.RemoteAddr())
		c.Close()
		return
	}
	m.mu.Lock()
	l := m.layers[r]
	m.mu.Unlock()
	if l == nil {
		m.refusals.note(m.log, refusedGroup, c.RemoteAddr())
		c.Close()
		return
	}
	if m.guard.Secret != nil {
		if err := memberauth.AcceptBy(c, m.guard.Secret, purpose(r), deadline); err != nil {
			m.refusals.note(m.log, refusedProof, c.RemoteAddr())
			c.Close()
			return
		}
	}
	if m.guard.ServerTLS != nil {
		tc := tls.Server(c, m.guard.ServerTLS)
		if err := tc.Handshake(); err != nil {
			m.refusals.note(m.log, refusedTLS, c.RemoteAddr())
			c.Close()
			return
		}
		c = tc
	}
	// A member's connection carries something at once (a Raft RPC, a gRPC
	// preface): one that does not is closed before Raft or gRPC allocate
	// their buffers for it.
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		m.refusals.note(m.log, refusedSilent, c.RemoteAddr())
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	c = &replayConn{Conn: c, first: first[0], has: true}
	if r.kind == Raft {
		c = m.countRaft(c)
	}
	pending = false
	m.pending.Add(-1)
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	case <-m.done:
		c.Close()
	}
}

// readHeader reads a connection's header, of either form.
func readHeader(c io.Reader) (route, error) {
	var b [1]byte
	next := func() (byte, error) {
		_, err := io.ReadFull(c, b[:])
		return b[0], err
	}
	n, err := next()
	if err != nil {
		return route{}, err
	}
	r := route{kind: Raft}
	if n == 0 {
		r.kind = Member
		if n, err = next(); err != nil {
			return route{}, err
		}
	}
	if n == 0 {
		// The versioned form: version, purpose, length.
		var h [3]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return route{}, err
		}
		if h[0] != HeaderVersion {
			return route{}, fmt.Errorf("%w: %d (this member reads %d)", ErrVersion, h[0], HeaderVersion)
		}
		if h[1] > byte(Member) {
			return route{}, fmt.Errorf("%w: purpose %d", ErrGroup, h[1])
		}
		r.kind, n = Kind(h[1]), h[2]
	}
	if n == 0 {
		return route{}, ErrGroup
	}
	name := make([]byte, n)
	if _, err := io.ReadFull(c, name); err != nil {
		return route{}, err
	}
	r.group = string(name)
	return r, nil
}

// header is the header of a connection for r: the versioned form, or the
// form 0.4.0 reads.
func header(r route, versioned bool) []byte {
	var h []byte
	switch {
	case versioned:
		h = append(h, 0, 0, HeaderVersion, byte(r.kind))
	case r.kind == Member:
		h = append(h, 0)
	}
	h = append(h, byte(len(r.group)))
	return append(h, r.group...)
}

// Layer is one group's raft.StreamLayer, or its member-call listener, on
// a mux.
type Layer struct {
	mux    *Mux
	route  route
	conns  chan net.Conn
	once   sync.Once
	closed chan struct{}
}

var _ raft.StreamLayer = (*Layer)(nil)

// Accept waits for the next connection for this group.
func (l *Layer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, ErrClosed
	case <-l.mux.done:
		return nil, ErrClosed
	}
}

// Close stops this layer (the mux keeps serving the others).
func (l *Layer) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.mux.mu.Lock()
		delete(l.mux.layers, l.route)
		l.mux.mu.Unlock()
	})
	return nil
}

// Addr is the address the mux advertises (its listener's by default).
func (l *Layer) Addr() net.Addr {
	if l.mux.advertise != nil {
		return l.mux.advertise
	}
	return l.mux.Addr()
}

// Dial connects to the mux at address for this layer's purpose and group.
func (l *Layer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := dial(ctx, string(address), l.route, l.mux.guard)
	if err != nil || l.route.kind != Raft {
		return c, err
	}
	return l.mux.countRaft(c), nil
}

// DialMember connects to the member port at address for member calls to
// group's member there, guarded as guard says (the secret proven, TLS).
func DialMember(ctx context.Context, address, group string, guard Guard) (net.Conn, error) {
	if group == "" || len(group) > 255 {
		return nil, fmt.Errorf("%w: %q", ErrGroup, group)
	}
	return dial(ctx, address, route{Member, group}, guard)
}

func dial(ctx context.Context, address string, r route, guard Guard) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(HeaderTimeout)
	}
	c.SetWriteDeadline(deadline)
	if _, err := c.Write(header(r, guard.VersionedHeader)); err != nil {
		c.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	if guard.Secret != nil {
		if err := memberauth.Dial(c, guard.Secret, purpose(r)); err != nil {
			c.Close()
			return nil, err
		}
	}
	if guard.ClientTLS != nil {
		cfg := guard.ClientTLS
		if host, _, err := net.SplitHostPort(address); err == nil && cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("raftmux: TLS to %s: %w", address, err)
		}
		c = tc
	}
	return c, nil
}

// purpose binds a membership proof to what a connection carries and for
// which group.
func purpose(r route) string {
	if r.kind == Member {
		return "member/" + r.group
	}
	return "raft/" + r.group
}
