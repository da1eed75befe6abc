package guard

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

// TestRedconPanicsWithoutGuard documents why sluice does not let redcon
// read requests: redcon's own parser panics on a bulk length near 2^63 (its
// bounds check overflows), which in a server kills the process. The Framer
// that replaced it refuses the same bytes with Redis' error. If the first
// half starts failing, redcon has changed; the second must never fail.
func TestRedconPanicsWithoutGuard(t *testing.T) {
	const stream = "*1\r\n$9223372036854775807\r\nabc"
	panicked := func() (p bool) {
		defer func() { p = recover() != nil }()
		redcon.Parse([]byte(stream))
		return false
	}()
	if !panicked {
		t.Fatal("redcon.Parse no longer panics on an overflowing bulk length")
	}
	if reqs, err, _ := frame(t, DefaultLimits(), true, []byte(stream)); len(reqs) != 0 || !errors.Is(err, ErrInvalidBulkLength) {
		t.Fatalf("Framer: %q %v, want ErrInvalidBulkLength", reqs, err)
	}
}

func TestHostileClients(t *testing.T) {
	addr, l := startServer(t, DefaultLimits(), false)

	// A well-behaved client pings throughout.
	stop := make(chan struct{})
	pings := make(chan int, 1)
	go func() {
		n := 0
		defer func() { pings <- n }()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		rd := bufio.NewReader(conn)
		for {
			select {
			case <-stop:
				return
			default:
			}
			conn.SetDeadline(time.Now().Add(ioTimeout))
			if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
				t.Errorf("ping %d: %v", n, err)
				return
			}
			if line, err := rd.ReadString('\n'); err != nil || line != "+PONG\r\n" {
				t.Errorf("ping %d: %q %v", n, line, err)
				return
			}
			n++
		}
	}()

	const pe = "-ERR Protocol error: "
	cases := []struct {
		name    string
		payload string
		want    string
	}{
		{"bulk length beyond int64", "*1\r\n$99999999999999999999\r\n", pe + "invalid bulk length\r\n"},
		{"bulk length max int64", "*1\r\n$9223372036854775807\r\nabc", pe + "invalid bulk length\r\n"},
		{"count max int64", "*9223372036854775807\r\n", pe + "invalid multibulk length\r\n"},
		{"ten million args", "*10000000\r\n", pe + "invalid multibulk length\r\n"},
		{"negative bulk", "*1\r\n$-1\r\n", pe + "invalid bulk length\r\n"},
		{"negative count is skipped", "*-1\r\n*1\r\n$4\r\nPING\r\n", "+PONG\r\n"},
		{"expected dollar", "*1\r\n:1\r\n", pe + "expected '$', got ':'\r\n"},
		{"replies before the violation", "*1\r\n$4\r\nPING\r\nPING\r\n*1\r\nX", "+PONG\r\n+PONG\r\n" + pe + "expected '$', got 'X'\r\n"},
		{"endless count line", "*" + strings.Repeat("1", 100000), pe + "too big mbulk count string\r\n"},
		{"endless bulk line", "*1\r\n$" + strings.Repeat("1", 100000), pe + "too big bulk count string\r\n"},
		{"unbalanced quotes", "ARGS \"a\r\n", pe + "unbalanced quotes in request\r\n"},
		{"half a command", "*3\r\n$3\r\nSET\r\n$1\r\nk", ""},
		{"huge bulk then disconnect", "*1\r\n$536870912\r\n" + strings.Repeat("x", 100000), ""},
		{"inline quoting reaches the handler", "ARGS \"a b\" 'c' \"\\x41\"\r\n", "*3\r\n$3\r\na b\r\n$1\r\nc\r\n$1\r\nA\r\n"},
	}
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := exchange(t, addr, []byte(c.payload)); got != c.want {
				t.Errorf("%s: got %q, want %q", c.name, got, c.want)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		endlessInline(t, addr)
	}()
	wg.Wait()

	close(stop)
	if n := <-pings; n == 0 {
		t.Error("the well-behaved client got no PONG")
	}
	ping(t, addr)
	// Every case that expects a protocol error, plus the endless line.
	want := uint64(1)
	for _, c := range cases {
		if strings.Contains(c.want, pe) {
			want++
		}
	}
	if got := l.Violations(); got != want {
		t.Errorf("Violations() = %d, want %d", got, want)
	}
}

// endlessInline sends one line without end, a few MB of it, and expects to
// be cut off at 64 KB.
func endlessInline(t *testing.T, addr string) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(ioTimeout))
	go func() {
		chunk := []byte(strings.Repeat("a", 64*1024))
		for sent := 0; sent < 8<<20; sent += len(chunk) {
			if _, err := conn.Write(chunk); err != nil {
				return // the guard closed the connection, as it should
			}
		}
	}()
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if line != "-ERR Protocol error: too big inline request\r\n" {
		t.Errorf("endless inline: got %q %v", line, err)
	}
}

func TestUnauthenticatedClients(t *testing.T) {
	addr, l := startServer(t, DefaultLimits(), true)
	const pe = "-ERR Protocol error: "
	big := strings.Repeat("v", 20000)
	cases := []struct {
		name    string
		payload string
		want    string
	}{
		{"eleven args", "*11\r\n", pe + "unauthenticated multibulk length\r\n"},
		{"big bulk", "*1\r\n$16385\r\n", pe + "unauthenticated bulk length\r\n"},
		{"small requests pass", "*1\r\n$4\r\nPING\r\n", "+PONG\r\n"},
		{"AUTH lifts the limits for the next request", "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*2\r\n$4\r\nARGS\r\n$20000\r\n" + big + "\r\n",
			"+OK\r\n*1\r\n$20000\r\n" + big + "\r\n"},
	}
	for _, c := range cases {
		if got := exchange(t, addr, []byte(c.payload)); got != c.want {
			t.Errorf("%s: got %.100q, want %.100q", c.name, got, c.want)
		}
	}
	if got := l.Violations(); got != 2 {
		t.Errorf("Violations() = %d, want 2", got)
	}
	ping(t, addr)
}
