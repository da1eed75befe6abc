package guard

import (
	"net"
	"sync/atomic"
)

// Listener wraps a net.Listener so every accepted connection is a *Conn.
// Give it to redcon.Server.Serve; handlers reach the *Conn through
// redcon.Conn.NetConn().
type Listener struct {
	inner        net.Listener
	limits       Limits
	authRequired bool
	read         atomic.Uint64
	violations   atomic.Uint64
}

// NewListener guards the connections inner accepts. With authRequired, each
// starts under the Unauth limits until Conn.SetAuthenticated(true). It errors
// when limits do not Validate.
func NewListener(inner net.Listener, limits Limits, authRequired bool) (*Listener, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	return &Listener{inner: inner, limits: limits, authRequired: authRequired}, nil
}

// Accept waits for the next connection and returns it as a *Conn.
func (l *Listener) Accept() (net.Conn, error) {
	inner, err := l.inner.Accept()
	if err != nil {
		return nil, err
	}
	return newConn(inner, l.limits, !l.authRequired, l), nil
}

// Close closes the wrapped listener.
func (l *Listener) Close() error { return l.inner.Close() }

// Addr is the wrapped listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// BytesRead counts the bytes read by all of its connections, closed ones included.
func (l *Listener) BytesRead() uint64 { return l.read.Load() }

// Violations counts the connections closed for a protocol violation.
func (l *Listener) Violations() uint64 { return l.violations.Load() }
