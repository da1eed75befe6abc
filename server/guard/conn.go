package guard

import (
	"io"
	"net"
	"sync/atomic"
	"time"
)

const (
	// readBufferSize is the staging buffer each connection reads the network
	// into (Redis reads 16 KiB at a time; half is plenty for a rate limiter
	// and halves the cost of idle connections). Requests may be far larger:
	// they are handed on in pieces.
	readBufferSize = 8 * 1024
	// errorReplyTimeout bounds how long a violating client may hold its
	// connection's goroutine by not reading the error reply.
	errorReplyTimeout = time.Second
	// outKeepCap is the largest synthesized-output buffer kept between reads.
	outKeepCap = 4096
	// maxEmptyReads is how many empty reads in a row Read tolerates from the
	// wrapped conn before giving up, the bound bufio uses.
	maxEmptyReads = 100
)

// Conn is a net.Conn whose Read yields only well-formed multibulk requests,
// for redcon to parse. Everything else passes through to the wrapped conn.
//
// Read hands on whole requests whenever it can: it stops at the last request
// boundary it has reached and keeps the start of the next request for the
// following Read, so redcon's buffer empties after each batch instead of
// growing (redcon keeps everything before an unfinished request until its
// buffer drains). A request that does not fit is handed on in pieces, and
// Read then waits for more of it rather than return a piece redcon can do
// nothing with, which spares redcon re-scanning a long request on every
// small read.
//
// Read must be called from one goroutine at a time (redcon does); the other
// methods are safe from any goroutine.
type Conn struct {
	net.Conn
	owner  *Listener // nil for a Conn made by NewConn
	v      Validator
	authed atomic.Bool
	read   atomic.Uint64
	// violation is the error the guard closed the connection for.
	violation atomic.Pointer[error]

	in   []byte // staging buffer: in[r:w] is read but not yet handed on
	r, w int
	// out is synthesized output (a "*<n>" header or a translated inline
	// request) still to hand on from outPos; outEnds says it ends a request.
	out     []byte
	outPos  int
	outEnds bool
	// readErr is an error from the wrapped conn, reported once what was
	// read before it has been handed on.
	readErr error
	failed  bool
}

// NewConn guards inner. authenticated says whether the connection starts
// with the full limits (no password configured) or the Unauth ones.
func NewConn(inner net.Conn, limits Limits, authenticated bool) (*Conn, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	return newConn(inner, limits, authenticated, nil), nil
}

func newConn(inner net.Conn, limits Limits, authenticated bool, owner *Listener) *Conn {
	c := &Conn{Conn: inner, owner: owner}
	c.v.init(limits, authenticated)
	c.authed.Store(authenticated)
	return c
}

// SetAuthenticated lifts (true) or restores (false) the Unauth limits. It
// takes effect from the next Read; before authentication each Read hands on
// one request, so an AUTH affects the request right after it.
func (c *Conn) SetAuthenticated(ok bool) { c.authed.Store(ok) }

// Authenticated reports the flag SetAuthenticated sets.
func (c *Conn) Authenticated() bool { return c.authed.Load() }

// BytesRead counts the bytes read from the network so far.
func (c *Conn) BytesRead() uint64 { return c.read.Load() }

// Violation is the protocol violation the guard closed the connection for,
// or nil. redcon reports such a close as a clean EOF; this tells them apart.
func (c *Conn) Violation() error {
	if p := c.violation.Load(); p != nil {
		return *p
	}
	return nil
}

// Read fills p with validated requests; see Conn.
func (c *Conn) Read(p []byte) (int, error) {
	if c.failed {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if c.in == nil {
		c.in = make([]byte, readBufferSize)
	}
	authed := c.authed.Load()
	c.v.SetAuthenticated(authed)
	// cutDst and cutSrc mark the last request boundary reached in this call
	// with something handed on before it: where p and in[] stood there.
	n, cutDst, cutSrc := 0, 0, 0
	empty := 0 // reads in a row that returned nothing
	for {
		if c.outPos < len(c.out) {
			k := copy(p[n:], c.out[c.outPos:])
			n += k
			c.outPos += k
			if c.outPos < len(c.out) {
				return c.cut(n, cutDst, cutSrc), nil
			}
			c.out, c.outPos = c.out[:0], 0
			if cap(c.out) > outKeepCap {
				c.out = nil // a long inline line's translation: do not pin it
			}
			if c.outEnds {
				c.outEnds = false
				cutDst, cutSrc = n, c.r
				if !authed {
					return n, nil
				}
			}
		}
		if n == len(p) {
			return c.cut(n, cutDst, cutSrc), nil
		}
		if c.r == c.w {
			if cutDst > 0 {
				return c.cut(n, cutDst, cutSrc), nil
			}
			if c.readErr != nil {
				if n > 0 {
					return n, nil
				}
				return 0, c.readErr
			}
			m, err := c.Conn.Read(c.in)
			c.account(m)
			c.r, c.w, c.readErr = 0, m, err
			if m == 0 && err == nil {
				if empty++; empty == maxEmptyReads {
					c.readErr = io.ErrNoProgress
				}
			}
			continue
		}
		end := min(c.w, c.r+len(p)-n)
		k, ev, err := c.v.Next(c.in[c.r:end])
		if err != nil {
			if cutDst > 0 {
				// Hand on the requests before the bad one first; the
				// next Read finds the violation again.
				return c.rollback(cutDst, cutSrc), nil
			}
			return 0, c.fail(err)
		}
		switch ev {
		case EventBody, EventBodyEnd:
			n += copy(p[n:], c.in[c.r:c.r+k])
		case EventHeader:
			c.out = append(c.out[:0], c.v.Header()...)
		case EventInline:
			c.out = c.v.AppendInline(c.out[:0])
			c.outEnds = true
		}
		c.r += k
		if ev == EventBodyEnd || ev == EventEmpty && n > 0 {
			cutDst, cutSrc = n, c.r
			if !authed {
				return n, nil
			}
		}
	}
}

// cut is how much of p to hand on when Read must return with n bytes in it:
// all of them at a request boundary, else up to the last boundary (keeping
// the unfinished request for the next Read), else all of them (a piece of a
// request too large for p).
func (c *Conn) cut(n, cutDst, cutSrc int) int {
	if c.v.AtBoundary() && c.outPos == len(c.out) || cutDst == 0 {
		return n
	}
	return c.rollback(cutDst, cutSrc)
}

// rollback forgets everything after the boundary at (cutDst, cutSrc). The
// bytes are still in in[], since Read reads the network only while it has
// reached no boundary.
func (c *Conn) rollback(cutDst, cutSrc int) int {
	c.v.Reset()
	c.r = cutSrc
	c.out, c.outPos, c.outEnds = c.out[:0], 0, false
	return cutDst
}

func (c *Conn) account(m int) {
	if m <= 0 {
		return
	}
	c.read.Add(uint64(m))
	if c.owner != nil {
		c.owner.read.Add(uint64(m))
	}
}

// fail answers a violation as Redis does, then closes the connection; redcon
// sees io.EOF and drops it like any closed connection.
func (c *Conn) fail(err error) error {
	c.failed = true
	c.violation.Store(&err)
	if c.owner != nil {
		c.owner.violations.Add(1)
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(errorReplyTimeout))
	_, _ = c.Conn.Write(replyLine(err))
	// Send FIN after the reply before closing, so the reply is not lost to
	// the reset that closing with unread input sends.
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.Conn.Close()
	return io.EOF
}
