package netproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// echoServer echoes every connection until its client closes, and counts
// the connections it accepted.
type echoServer struct {
	ln       net.Listener
	mu       sync.Mutex
	accepted int
	wg       sync.WaitGroup
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.accepted++
			e.mu.Unlock()
			e.wg.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
				_ = c.(*net.TCPConn).CloseWrite()
			})
		}
	})
	t.Cleanup(func() { _ = ln.Close(); e.wg.Wait() })
	return e
}

func (e *echoServer) connections() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.accepted
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// A bug fails the test instead of hanging it.
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// roundTrip writes msg and reads it back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read: %v", err)
	}
	if string(buf) != msg {
		t.Fatalf("echo = %q, want %q", buf, msg)
	}
}

// wantDropped checks that c was cut: a read ends with an error that is not
// the test's own deadline.
func wantDropped(t *testing.T, c net.Conn) {
	t.Helper()
	_, _ = c.Write([]byte("lost"))
	_, err := c.Read(make([]byte, 16))
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a partitioned connection = %v, want it dropped", err)
	}
}

func TestProxyForwards(t *testing.T) {
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	roundTrip(t, c, "PING")
	roundTrip(t, c, "a longer message that still fits")
	// A half-close reaches the server, and its answer still comes back.
	if _, err := c.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(c)
	if err != nil || string(rest) != "last" {
		t.Fatalf("after a half-close read %q, %v; want \"last\"", rest, err)
	}
}

func TestPartitionDropsOpenAndNewConnectionsUntilHeal(t *testing.T) {
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String())
	open := dial(t, p.Addr())
	roundTrip(t, open, "before")

	p.Partition()
	wantDropped(t, open)
	before := e.connections()
	fresh := dial(t, p.Addr()) // the listener still accepts, as a SYN is acked by the kernel
	wantDropped(t, fresh)
	if got := e.connections(); got != before {
		t.Fatalf("the target saw %d new connections during the partition, want 0", got-before)
	}

	p.Heal()
	healed := dial(t, p.Addr())
	roundTrip(t, healed, "after")
}

func TestCloseStopsEverything(t *testing.T) {
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	roundTrip(t, c, "x")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	wantDropped(t, c)
	if c2, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second); err == nil {
		_ = c2.Close()
		t.Fatal("dial after Close succeeded")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestDeadTargetDropsTheClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	p := newProxy(t, dead)
	wantDropped(t, dial(t, p.Addr()))
}

// A swallowed answer: the marked request reaches the target, the client's
// connection breaks at the answer, and the target's side stays open (it
// is not told its caller left, as it would not be when an answer is lost
// on the network).
func TestSwallowReplyToLosesTheAnswerNotTheRequest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type seen struct {
		got      string
		readOpen bool // the target's read was still waiting after its answer
	}
	result := make(chan seen, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			result <- seen{}
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		var got []byte
		for len(got) < len("before|charge") {
			n, err := c.Read(buf)
			if err != nil {
				break
			}
			got = append(got, buf[:n]...)
			_, _ = c.Write(buf[:n]) // the answer
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = c.Read(buf)
		result <- seen{got: string(got), readOpen: errors.Is(err, os.ErrDeadlineExceeded)}
	}()
	p := newProxy(t, ln.Addr().String())
	c := dial(t, p.Addr())
	roundTrip(t, c, "before|")
	p.SwallowReplyTo("charge")
	if _, err := c.Write([]byte("charge")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 16)); err == nil {
		t.Fatalf("read %d bytes of a swallowed answer", n)
	}
	s := <-result
	if s.got != "before|charge" {
		t.Fatalf("the target received %q, want the marked request too", s.got)
	}
	if !s.readOpen {
		t.Fatal("the target's side was closed with the client's: it would learn its caller left")
	}
}

// A delay holds the bytes each way: a round trip takes at least twice it;
// set back to 0, the link carries on as before.
func TestDelayHoldsBothWays(t *testing.T) {
	e := newEchoServer(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	roundTrip(t, c, "before")
	const d = 100 * time.Millisecond
	p.SetDelay(d)
	start := time.Now()
	roundTrip(t, c, "slow")
	if took := time.Since(start); took < 2*d {
		t.Fatalf("a round trip through a link delayed %v each way took %v", d, took)
	}
	p.SetDelay(0)
	roundTrip(t, c, "after")
}
