package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// pipeListener hands out the server ends of net.Pipe pairs.
type pipeListener struct {
	conns chan net.Conn
}

func (l *pipeListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (l *pipeListener) Close() error   { return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

// dial makes a pair and returns the client end and the capped server end
// (nil when the listener turned it away).
func (l *pipeListener) dial(t *testing.T, cl *cappedListener) (client net.Conn, server *cappedConn) {
	t.Helper()
	srv, cli := net.Pipe()
	l.conns <- srv
	c, err := cl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return cli, c.(*cappedConn)
}

func closedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF || (err != nil && !isTimeoutErr(err))
}

func isTimeoutErr(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// At the cap, the connection silent longest is closed for a new one — not
// the one that talked last — and a busy connection (its request being
// decided) is never closed: with every connection busy the new one is
// refused instead.
func TestCappedListenerEvictsTheLongestSilentIdle(t *testing.T) {
	pl := &pipeListener{conns: make(chan net.Conn, 1)}
	cl := newCappedListener(pl, 3)
	cl.refuse = func(c net.Conn) { c.Close() }

	var clients [3]net.Conn
	var servers [3]*cappedConn
	base := time.Now().UnixNano()
	for i := range clients {
		clients[i], servers[i] = pl.dial(t, cl)
	}
	// Silent longest: 1, then 0, then 2 (the most recent talker).
	servers[0].lastRead.Store(base - 2e9)
	servers[1].lastRead.Store(base - 3e9)
	servers[2].lastRead.Store(base - 1e9)

	c3, s3 := pl.dial(t, cl)
	if !closedByServer(clients[1]) {
		t.Fatal("the connection silent longest was not the one closed")
	}
	for _, i := range []int{0, 2} {
		if closedByServer(clients[i]) {
			t.Fatalf("connection %d closed; want only the one silent longest", i)
		}
	}
	if cl.evicted.Load() != 1 || cl.open() != 3 {
		t.Fatalf("evicted %d, open %d", cl.evicted.Load(), cl.open())
	}

	// 0 is busy: 2 goes next although 0 is silent longer.
	servers[0].state.Store(connBusy)
	s3.lastRead.Store(base)
	_, s4 := pl.dial(t, cl)
	if closedByServer(clients[0]) || !closedByServer(clients[2]) {
		t.Fatal("a busy connection was closed, or the silent idle one was not")
	}

	// Every connection busy: the new one is refused, none closed.
	s3.state.Store(connBusy)
	s4.state.Store(connBusy)
	srv, cli := net.Pipe()
	pl.conns <- srv
	close(pl.conns)
	if _, err := cl.Accept(); err != net.ErrClosed {
		t.Fatalf("Accept after the refusal: %v", err)
	}
	eventuallyTrue(t, func() bool { return cl.refused.Load() == 1 })
	if !closedByServer(cli) || closedByServer(clients[0]) || closedByServer(c3) || cl.open() != 3 {
		t.Fatal("with every connection busy, the new one was not refused, or a busy one was closed")
	}
}

func eventuallyTrue(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not reached")
}

// The HTTP door's refusal at its cap is a whole HTTP response a client can
// read: 503, Retry-After, its body as long as it says.
func TestRefuseHTTPIsAWholeResponse(t *testing.T) {
	srv, cli := net.Pipe()
	go refuseHTTP(srv)
	go cli.Write([]byte("POST /json HTTP/1.1\r\nHost: sluice\r\nContent-Length: 2\r\n\r\n{}"))
	cli.SetReadDeadline(time.Now().Add(5 * time.Second))
	r, err := http.ReadResponse(bufio.NewReader(cli), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil || r.StatusCode != 503 || r.Header.Get("Retry-After") != "1" || int64(len(body)) != r.ContentLength ||
		!strings.Contains(string(body), "too many HTTP connections") {
		t.Fatalf("refusal: %d %v %q (%d of %d bytes) %v", r.StatusCode, r.Header, body, len(body), r.ContentLength, err)
	}
}
