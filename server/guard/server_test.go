package guard

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

// ioTimeout keeps a broken test from hanging; nothing is measured with it.
const ioTimeout = 10 * time.Second

// testServer serves connections through a Framer, as the sluice server
// does. Its commands: PING, AUTH (lifts the Unauth limits), ARGS (replies
// with its arguments); anything else is an unknown command.
type testServer struct {
	limits       Limits
	authRequired bool
	violations   atomic.Uint64
}

// Violations counts the connections closed for a protocol violation.
func (s *testServer) Violations() uint64 { return s.violations.Load() }

// startServer runs a testServer on 127.0.0.1:0.
func startServer(t testing.TB, limits Limits, authRequired bool) (string, *testServer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewFramer(limits, !authRequired); err != nil {
		t.Fatal(err)
	}
	s := &testServer{limits: limits, authRequired: authRequired}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.serve(c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String(), s
}

func (s *testServer) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	f, _ := NewFramer(s.limits, !s.authRequired)
	var out []byte
	for {
		if _, err := f.Fill(c); err != nil {
			return
		}
		for {
			args, err := f.Next()
			if err != nil {
				s.violations.Add(1)
				c.Write(AppendReply(out, err))
				c.(*net.TCPConn).CloseWrite()
				return
			}
			if args == nil {
				break
			}
			switch strings.ToUpper(string(args[0])) {
			case "PING":
				out = redcon.AppendString(out, "PONG")
			case "AUTH":
				f.SetAuthenticated(true)
				out = redcon.AppendString(out, "OK")
			case "ARGS":
				out = redcon.AppendArray(out, len(args)-1)
				for _, a := range args[1:] {
					out = redcon.AppendBulk(out, a)
				}
			default:
				out = redcon.AppendError(out, "ERR unknown command")
			}
		}
		if _, err := c.Write(out); err != nil {
			return
		}
		out = out[:0]
	}
}

// exchange sends payload on a fresh connection, closes its sending side,
// and returns everything the server sent until it closed the connection.
// Sending runs alongside receiving so neither side can block the other.
func exchange(t testing.TB, addr string, payload []byte) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(ioTimeout))
	go func() {
		conn.Write(payload) // fails once the server has closed the connection
		conn.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(conn)
	if err != nil && !isReset(err) {
		t.Fatalf("reading the reply to %.80q: %v (after %q)", payload, err, got)
	}
	return string(got)
}

// isReset reports a connection reset: the server closed with input unread,
// which is expected after a violation; what was received before it counts.
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}

// ping checks that a fresh client gets PONG.
func ping(t testing.TB, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING from a fresh client: %q %v", line, err)
	}
}
