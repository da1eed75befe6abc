package server

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fdConn is a client's TCP socket, owned by an event loop rather than Go's
// poller: non-blocking, read only when the loop's epoll says so. It is a
// net.Conn for what the rest of the server does with a connection (write
// a backlog, close, report addresses, carry TLS).
//
// Only the loop releases the descriptor (release), after every other user
// is done with it; Close from any goroutine (CLIENT KILL, shutdown) shuts
// the socket down, which the loop sees as the end of the connection. So a
// descriptor number is never used after the loop released it to be
// reused.
type fdConn struct {
	fd            int
	local, remote net.Addr

	mu       sync.RWMutex // held for reading around every use of fd
	released bool
	shut     atomic.Bool
	// blocking makes Read wait for bytes (the TLS handshake, which runs
	// before the loop takes the connection).
	blocking bool
	// rdl and wdl are the deadlines, Unix ns (0: none).
	rdl, wdl atomic.Int64
}

// errWouldBlock is a read or write that the socket cannot take now. It is
// a temporary net.Error, so crypto/tls keeps the connection usable and
// retries once the loop reports the socket readable.
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "server: socket not ready" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

// detach takes nc's socket out of Go's poller: a duplicate descriptor,
// non-blocking, owned by the returned fdConn; nc itself is closed.
func detach(nc net.Conn) (*fdConn, error) {
	inner := nc
	if w, ok := nc.(interface{ NetConn() net.Conn }); ok {
		inner = w.NetConn()
	}
	sc, ok := inner.(syscall.Conn)
	if !ok {
		return nil, errors.New("server: not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd, derr := -1, error(nil)
	if err := raw.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	c := &fdConn{fd: fd, local: nc.LocalAddr(), remote: nc.RemoteAddr()}
	nc.Close()
	return c, nil
}

// Read reads what the socket holds. Non-blocking (the loop's use), it
// returns errWouldBlock when the socket holds nothing.
func (c *fdConn) Read(p []byte) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.released {
		return 0, net.ErrClosed
	}
	for {
		n, err := unix.Read(c.fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if !c.blocking {
				return 0, errWouldBlock
			}
			if err := c.await(unix.POLLIN, &c.rdl); err != nil {
				return 0, err
			}
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// Write writes all of b, waiting for room in the socket (the backlog
// writer's and TLS' use), until the write deadline.
func (c *fdConn) Write(b []byte) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.released {
		return 0, net.ErrClosed
	}
	done := 0
	for done < len(b) {
		n, err := unix.Write(c.fd, b[done:])
		if n > 0 {
			done += n
		}
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			if err := c.await(unix.POLLOUT, &c.wdl); err != nil {
				return done, err
			}
		case err != nil:
			return done, err
		}
	}
	return done, nil
}

// await waits until the socket is ready for ev or the deadline passes.
func (c *fdConn) await(ev int16, deadline *atomic.Int64) error {
	timeout := -1
	if at := deadline.Load(); at != 0 {
		left := time.Until(time.Unix(0, at))
		if left <= 0 {
			return os.ErrDeadlineExceeded
		}
		timeout = int((left + time.Millisecond - 1) / time.Millisecond)
	}
	fds := []unix.PollFd{{Fd: int32(c.fd), Events: ev}}
	for {
		_, err := unix.Poll(fds, timeout)
		if err != unix.EINTR {
			return err
		}
	}
}

// Close shuts the socket down; the loop releases the descriptor when it
// sees the connection end.
func (c *fdConn) Close() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.released && c.shut.CompareAndSwap(false, true) {
		unix.Shutdown(c.fd, unix.SHUT_RDWR)
	}
	return nil
}

// CloseWrite sends FIN after the replies so far.
func (c *fdConn) CloseWrite() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.released {
		return net.ErrClosed
	}
	return unix.Shutdown(c.fd, unix.SHUT_WR)
}

// release closes the descriptor; the loop calls it once nothing else
// uses the connection.
func (c *fdConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.released {
		c.released = true
		unix.Close(c.fd)
	}
}

// unread reports whether bytes wait in the socket, unread.
func (c *fdConn) unread() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.released {
		return false
	}
	n, err := unix.IoctlGetInt(c.fd, unix.SIOCINQ)
	return err == nil && n > 0
}

func (c *fdConn) LocalAddr() net.Addr  { return c.local }
func (c *fdConn) RemoteAddr() net.Addr { return c.remote }

// The deadlines bound the blocking uses (the handshake's reads, the
// backlog's writes); the loop's reads never wait.
func (c *fdConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}
func (c *fdConn) SetReadDeadline(t time.Time) error  { c.rdl.Store(unixNano(t)); return nil }
func (c *fdConn) SetWriteDeadline(t time.Time) error { c.wdl.Store(unixNano(t)); return nil }

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// SyscallConn lets output write without waiting (see nonblocking).
func (c *fdConn) SyscallConn() (syscall.RawConn, error) { return rawFD{c}, nil }

type rawFD struct{ c *fdConn }

func (r rawFD) Control(f func(uintptr)) error {
	return r.use(func(fd uintptr) bool { f(fd); return true })
}
func (r rawFD) Read(f func(uintptr) bool) error  { return r.use(f) }
func (r rawFD) Write(f func(uintptr) bool) error { return r.use(f) }

func (r rawFD) use(f func(uintptr) bool) error {
	r.c.mu.RLock()
	defer r.c.mu.RUnlock()
	if r.c.released {
		return net.ErrClosed
	}
	f(uintptr(r.c.fd))
	return nil
}
