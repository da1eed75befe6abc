package memberauth

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Layer wraps a Raft stream layer so every connection it dials or accepts
// proves membership first (purpose names what it carries, e.g. the
// group). A connection that fails the handshake is closed and logged; Raft
// never sees it. Handshakes of accepted connections run aside, so one slow
// or silent dialer holds up no other.
type Layer struct {
	inner   raft.StreamLayer
	secret  []byte
	purpose string
	log     *slog.Logger

	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

var _ raft.StreamLayer = (*Layer)(nil)

// Wrap returns inner behind the handshake; Check(secret) must hold.
func Wrap(inner raft.StreamLayer, secret []byte, purpose string, log *slog.Logger) *Layer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Layer{inner: inner, secret: secret, purpose: purpose, log: log, conns: make(chan net.Conn), closed: make(chan struct{})}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *Layer) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.inner.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go l.admit(c)
	}
}

func (l *Layer) admit(c net.Conn) {
	if err := Accept(c, l.secret, l.purpose); err != nil {
		l.log.Warn("a connection to the member port did not prove cluster membership; closed", "from", c.RemoteAddr().String(), "purpose", l.purpose)
		c.Close()
		return
	}
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	}
}

// Accept waits for the next connection that proved membership.
func (l *Layer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Dial connects through the inner layer and proves membership both ways.
func (l *Layer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := l.inner.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	if err := Dial(c, l.secret, l.purpose); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close stops accepting and closes the inner layer.
func (l *Layer) Close() error {
	var err error
	l.once.Do(func() {
		close(l.closed)
		err = l.inner.Close()
		l.wg.Wait()
	})
	return err
}

// Addr is the inner layer's address.
func (l *Layer) Addr() net.Addr { return l.inner.Addr() }

// TCPLayer is a plain TCP stream layer: a listener and a dialer, what
// raft's TCP transport uses, for Wrap to stand in front of.
type TCPLayer struct {
	ln        net.Listener
	advertise net.Addr
}

// ListenTCP listens on bind; advertise is the address Raft names this
// member by (nil: the listener's).
func ListenTCP(bind string, advertise net.Addr) (*TCPLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	return &TCPLayer{ln: ln, advertise: advertise}, nil
}

// Accept implements raft.StreamLayer.
func (t *TCPLayer) Accept() (net.Conn, error) { return t.ln.Accept() }

// Close implements raft.StreamLayer.
func (t *TCPLayer) Close() error { return t.ln.Close() }

// Addr implements raft.StreamLayer.
func (t *TCPLayer) Addr() net.Addr { return t.advertise }

// Dial implements raft.StreamLayer.
func (t *TCPLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}
