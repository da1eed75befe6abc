// Package raftmux carries several Raft groups over one TCP port: a process
// hosting a member of each of several groups (three machines, three
// groups, one leader each) listens once for Raft. Each connection opens
// with the name of the group it is for; the mux hands it to that group's
// StreamLayer, which a hashicorp/raft NetworkTransport takes in place of a
// TCP listener of its own.
//
// The header is one byte of length and the group's id (1 to 255 bytes). A
// connection that does not send it within HeaderTimeout, or names a group
// this process does not host, is closed. With a cluster secret, both ends
// then prove they hold it (package memberauth, bound to the group) before
// the group's Raft hears anything.
package raftmux

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluice-rl/sluice/memberauth"
)

// HeaderTimeout bounds how long an accepted connection may take to name
// its group.
const HeaderTimeout = 5 * time.Second

// Errors.
var (
	// ErrClosed: the mux or the layer is closed.
	ErrClosed = errors.New("raftmux: closed")
	// ErrGroup: a group id that cannot be a header (empty, over 255
	// bytes), or one asked for twice.
	ErrGroup = errors.New("raftmux: bad group")
)

// Mux is one Raft listener shared by groups.
type Mux struct {
	ln     net.Listener
	secret []byte
	log    *slog.Logger
	mu     sync.Mutex
	layers map[string]*Layer
	done   chan struct{}
	wg     sync.WaitGroup
}

// Listen listens for Raft on addr; secret (nil: none) is the cluster's,
// which every connection must prove (memberauth.Check must hold).
func Listen(addr string, secret []byte, log *slog.Logger) (*Mux, error) {
	if secret != nil {
		if err := memberauth.Check(secret); err != nil {
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
	m := &Mux{ln: ln, secret: secret, log: log, layers: map[string]*Layer{}, done: make(chan struct{})}
	m.wg.Add(1)
	go m.serve()
	return m, nil
}

// Addr is the address the mux listens on.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Layer is group's stream layer on this mux (one per group).
func (m *Mux) Layer(group string) (*Layer, error) {
	if group == "" || len(group) > 255 {
		return nil, fmt.Errorf("%w: %q", ErrGroup, group)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.layers[group]; dup {
		return nil, fmt.Errorf("%w: group %s has a layer already", ErrGroup, group)
	}
	l := &Layer{mux: m, group: group, conns: make(chan net.Conn), closed: make(chan struct{})}
	m.layers[group] = l
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
			m.log.Warn("raftmux: accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go m.route(c)
	}
}

// route reads c's header and hands c to its group's layer.
func (m *Mux) route(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(HeaderTimeout))
	var n [1]byte
	if _, err := io.ReadFull(c, n[:]); err != nil || n[0] == 0 {
		c.Close()
		return
	}
	name := make([]byte, n[0])
	if _, err := io.ReadFull(c, name); err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	m.mu.Lock()
	l := m.layers[string(name)]
	m.mu.Unlock()
	if l == nil {
		m.log.Warn("raftmux: a connection for a group not hosted here", "group", string(name), "from", c.RemoteAddr())
		c.Close()
		return
	}
	if m.secret != nil {
		if err := memberauth.Accept(c, m.secret, purpose(l.group)); err != nil {
			m.log.Warn("raftmux: a connection did not prove cluster membership; closed", "group", l.group, "from", c.RemoteAddr().String())
			c.Close()
			return
		}
	}
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	case <-m.done:
		c.Close()
	}
}

// Layer is one group's raft.StreamLayer on a mux.
type Layer struct {
	mux    *Mux
	group  string
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
		delete(l.mux.layers, l.group)
		l.mux.mu.Unlock()
	})
	return nil
}

// Addr is the mux's address.
func (l *Layer) Addr() net.Addr { return l.mux.Addr() }

// Dial connects to the mux at address and names this layer's group.
func (l *Layer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	header := append([]byte{byte(len(l.group))}, l.group...)
	c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write(header); err != nil {
		c.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	if s := l.mux.secret; s != nil {
		if err := memberauth.Dial(c, s, purpose(l.group)); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// purpose binds a membership proof to the group a connection carries.
func purpose(group string) string { return "raft/" + group }
