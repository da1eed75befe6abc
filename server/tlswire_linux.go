package server

// tlsWire is what a TLS connection's crypto/tls layer reads and writes:
// the socket (fdConn) for reading, and, once the connection is in its
// event loop, the connection's output for writing. crypto/tls writes with
// its output lock held; a write that waited for room in the socket would
// hold that lock while the client does not read, and then any other TLS
// write — an alert the loop's read answers a bad record with, a key
// update, close_notify — would wait too, stalling the loop and every
// client on it. Through the output, a write takes what the socket takes
// now and queues the rest for the writer goroutine, as a plain
// connection's replies do.
type tlsWire struct {
	*fdConn
	// out is the connection's output; nil during the handshake, whose
	// writes (on the handshake's own goroutine) wait for the socket.
	out *output
}

func (w *tlsWire) Write(b []byte) (int, error) {
	if w.out == nil {
		return w.fdConn.Write(b)
	}
	if err := w.out.sendRaw(b); err != nil {
		return 0, err
	}
	return len(b), nil
}
