//go:build unix

package server

import (
	"io"
	"net"
	"syscall"
)

// nonblocking writes to a socket without waiting for room in it.
type nonblocking struct {
	raw syscall.RawConn // nil: not a plain socket (TLS)
	// fn is writeSome bound once, so a write allocates nothing.
	fn    func(fd uintptr) bool
	pend  []byte
	wrote int
	err   error
}

func (w *nonblocking) init(nc net.Conn) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	w.raw = raw
	w.fn = w.writeSome
}

func (w *nonblocking) ok() bool { return w.raw != nil }

// maxWriteNow is the most writeNow sends of one batch; a larger reply's
// rest goes to the writer goroutine, so one client taking a big reply as
// fast as it reads (the socket never full) cannot hold its event loop and
// the other clients on it (Redis caps a write per event the same way).
const maxWriteNow = 256 << 10

// writeNow writes as much of b as the socket takes now, at most
// maxWriteNow bytes, and returns how much that was.
func (w *nonblocking) writeNow(b []byte) (int, error) {
	w.pend, w.wrote, w.err = b[:min(len(b), maxWriteNow)], 0, nil
	err := w.raw.Write(w.fn)
	n := w.wrote
	if err == nil {
		err = w.err
	}
	w.pend, w.err = nil, nil
	return n, err
}

// writeSome is the RawConn callback: it returns true always, so the
// runtime never parks the goroutine waiting for room.
func (w *nonblocking) writeSome(fd uintptr) bool {
	for w.wrote < len(w.pend) {
		n, err := syscall.Write(int(fd), w.pend[w.wrote:])
		if n > 0 {
			w.wrote += n
		}
		switch {
		case err == syscall.EINTR:
		case err == syscall.EAGAIN:
			return true
		case err != nil:
			w.err = err
			return true
		case n == 0:
			w.err = io.ErrShortWrite
			return true
		}
	}
	return true
}
