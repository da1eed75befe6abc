package guard

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

// ioTimeout keeps a broken test from hanging; nothing is measured with it.
const ioTimeout = 10 * time.Second

// startServer runs a redcon server behind the guard on 127.0.0.1:0. Its
// commands: PING, AUTH (authenticates the guard conn), ARGS (replies with its
// arguments); anything else is an unknown command.
func startServer(t testing.TB, limits Limits, authRequired bool) (string, *Listener) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewListener(inner, limits, authRequired)
	if err != nil {
		t.Fatal(err)
	}
	srv := redcon.NewServer("", func(conn redcon.Conn, cmd redcon.Command) {
		switch strings.ToUpper(string(cmd.Args[0])) {
		case "PING":
			conn.WriteString("PONG")
		case "AUTH":
			conn.NetConn().(*Conn).SetAuthenticated(true)
			conn.WriteString("OK")
		case "ARGS":
			conn.WriteArray(len(cmd.Args) - 1)
			for _, a := range cmd.Args[1:] {
				conn.WriteBulk(a)
			}
		default:
			conn.WriteError("ERR unknown command")
		}
	}, nil, nil)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		l.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String(), l
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
		conn.Write(payload) // fails once the guard has closed the connection
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
