package server

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// writeChunk is the most one blocking write of the writer goroutine sends,
// so its progress (which keeps a connection from counting as idle) is
// recorded at least this often.
const writeChunk = 64 * 1024

// errAbandoned is what a connection closed over its output buffer limit
// reports for replies it can no longer send.
var errAbandoned = errors.New("server: replies abandoned")

// output sends a connection's replies. While the socket takes them, each
// batch is written at once by whoever runs the connection (its event
// loop), without blocking (see writeNow). What the socket does not take is
// queued for a writer goroutine, started for the backlog and gone once it
// is sent, while the loop goes on reading: so a client that pipelines
// without reading its replies sees its queue grow until it passes the
// output buffer limit, as in Redis, instead of stalling both sides.
// A TLS connection's replies are encrypted first (seal), and the records
// come back here through its tlsWire.
type output struct {
	nc net.Conn
	nb nonblocking
	// seal is the connection's TLS layer, or nil: send writes through it.
	seal interface{ Write([]byte) (int, error) }

	mu sync.Mutex
	// queued is the backlog in chunks of at most queueChunk bytes (a
	// larger write is its own chunk): appending never copies what is
	// queued, and a chunk's memory goes as soon as it is written.
	queued [][]byte
	busy   bool          // a writer goroutine runs
	done   chan struct{} // closed when that goroutine exits
	err    error         // the write error that ended the connection
	// unsent counts the bytes queued or being written; 0 means the socket
	// has everything, so the next batch may be written directly. Every
	// change to it is made to total too (see add).
	unsent atomic.Int64
	// total is the server's count of every connection's unsent bytes
	// (maxmemory-clients); nil counts nowhere else.
	total *atomic.Int64
	// sentAt is when the writer goroutine last made progress, Unix ns.
	sentAt atomic.Int64
}

func (o *output) init(nc net.Conn, total *atomic.Int64) {
	o.nc = nc
	o.nb.init(nc)
	o.total = total
}

// add changes the unsent count by n, and the server's total with it.
func (o *output) add(n int64) {
	o.unsent.Add(n)
	if o.total != nil {
		o.total.Add(n)
	}
}

// release takes what is still counted as unsent out of the server's total,
// once the connection is closed and its writer gone.
func (o *output) release() {
	if n := o.unsent.Swap(0); n != 0 && o.total != nil {
		o.total.Add(-n)
	}
}

// send writes b, or queues what the socket does not take at once. It does
// not keep b.
//
// It is safe for concurrent use (pub/sub messages are sent from the
// publisher's goroutine): each call's bytes reach the socket whole and in
// the order the calls took the lock (TLS' own lock, then this one, for a
// sealed output).
func (o *output) send(b []byte) error {
	if o.seal != nil {
		_, err := o.seal.Write(b) // its records come back through sendRaw
		return err
	}
	return o.sendRaw(b)
}

// sendRaw is send of bytes as they go on the wire.
func (o *output) sendRaw(b []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	if o.nb.ok() && o.unsent.Load() == 0 {
		n, err := o.nb.writeNow(b)
		if err != nil {
			return err
		}
		if n == len(b) {
			return nil
		}
		b = b[n:]
	}
	o.enqueue(b)
	o.add(int64(len(b)))
	if !o.busy {
		o.busy = true
		o.done = make(chan struct{})
		o.sentAt.Store(time.Now().UnixNano())
		go o.drain(o.done)
	}
	return nil
}

// queueChunk is the size of the backlog's chunks.
const queueChunk = 64 << 10

// enqueue copies b to the end of the backlog; o.mu is held.
func (o *output) enqueue(b []byte) {
	if n := len(o.queued); n > 0 {
		last := o.queued[n-1]
		k := min(cap(last)-len(last), len(b))
		o.queued[n-1] = append(last, b[:k]...)
		b = b[k:]
	}
	for len(b) > 0 {
		c := make([]byte, 0, max(queueChunk, min(len(b), 1<<20)))
		k := min(cap(c), len(b))
		o.queued = append(o.queued, append(c, b[:k]...))
		b = b[k:]
	}
}

// drain is the writer goroutine: it sends the queue until it is empty.
func (o *output) drain(done chan struct{}) {
	defer close(done)
	for {
		o.mu.Lock()
		if len(o.queued) == 0 || o.err != nil {
			o.busy = false
			o.mu.Unlock()
			return
		}
		chunk := o.queued[0]
		o.queued[0] = nil
		o.queued = o.queued[1:]
		if len(o.queued) == 0 {
			o.queued = nil
		}
		o.mu.Unlock()
		for rest := chunk; len(rest) > 0; {
			n, err := o.nc.Write(rest[:min(len(rest), writeChunk)])
			o.add(-int64(n))
			o.sentAt.Store(time.Now().UnixNano())
			if err != nil {
				o.add(-int64(len(rest) - n)) // never to be sent
				o.mu.Lock()
				o.err = err
				o.busy = false
				o.mu.Unlock()
				o.nc.Close()
				return
			}
			rest = rest[n:]
		}
	}
}

// queuedBytes is how much of the replies already handed to send is not
// yet in the socket.
func (o *output) queuedBytes() int { return int(o.unsent.Load()) }

// sentWithin reports whether replies were being sent within the last d.
func (o *output) sentWithin(d time.Duration) bool {
	return o.unsent.Load() > 0 || time.Now().UnixNano()-o.sentAt.Load() < int64(d)
}

// abandon drops the queued replies and closes the socket.
func (o *output) abandon() {
	o.mu.Lock()
	for _, c := range o.queued {
		o.add(-int64(len(c)))
	}
	o.queued = nil
	if o.err == nil {
		o.err = errAbandoned
	}
	o.mu.Unlock()
	o.nc.Close()
}

// finish waits until the queued replies are sent, giving the client at
// most timeout to take them.
func (o *output) finish(timeout time.Duration) {
	if o.unsent.Load() == 0 {
		return
	}
	o.nc.SetWriteDeadline(time.Now().Add(timeout))
	o.wait()
}

// wait waits for the writer goroutine, if one runs, to exit.
func (o *output) wait() {
	o.mu.Lock()
	busy, done := o.busy, o.done
	o.mu.Unlock()
	if busy {
		<-done
	}
}
