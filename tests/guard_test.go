package tests

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// hostile sends payload on a fresh connection and returns everything the
// server answered before it closed the connection.
func hostile(t *testing.T, addr string, payload []byte, closeAfter bool) string {
	t.Helper()
	cn := dialRaw(t, addr)
	defer cn.Close()
	if _, err := cn.Write(payload); err != nil {
		return "write: " + err.Error()
	}
	if closeAfter {
		return ""
	}
	out, _ := io.ReadAll(cn)
	return string(out)
}

// Hostile byte streams close only their own connection; a well-behaved
// client keeps getting answers the whole time and the server survives.
func TestHostileStreams(t *testing.T) {
	s := StartServer(t)
	good := s.Client()
	var stop atomic.Bool
	var answered atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if err := good.Do(ctx(t), "CL.THROTTLE", "good", 1000000, 1000000, 1).Err(); err != nil {
				t.Errorf("well-behaved client failed: %v", err)
				return
			}
			answered.Add(1)
		}
	}()
	for _, tc := range []struct {
		name    string
		payload string
		want    string
	}{
		{"huge bulk length", "*1\r\n$99999999999999999999\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk length near 2^63", "*1\r\n$9223372036854775807\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"negative bulk length", "*1\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"huge multibulk", "*9223372036854775807\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"10M-element multibulk", "*10000000\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"not a bulk", "*1\r\n:5\r\n", "-ERR Protocol error: expected '$', got ':'\r\n"},
		{"endless inline", strings.Repeat("A", 200_000), "-ERR Protocol error: too big inline request\r\n"},
		{"unbalanced quotes", "SET \"abc\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
	} {
		if got := hostile(t, s.Addr, []byte(tc.payload), false); got != tc.want {
			t.Errorf("%s: server answered %q, want %q", tc.name, got, tc.want)
		}
	}
	// Half a command, then hang up.
	hostile(t, s.Addr, []byte("*3\r\n$11\r\nCL.THROTTLE\r\n$3\r\nke"), true)
	// A valid command in front of a violation is still answered.
	if got := hostile(t, s.Addr, []byte("PING\r\n*1\r\n$-7\r\n"), false); got != "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n" {
		t.Errorf("request before the violation: %q", got)
	}
	before := answered.Load()
	eventually(t, "the well-behaved client keeps getting answers", func() bool { return answered.Load() >= before+20 })
	stop.Store(true)
	wg.Wait()
	if err := good.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("server gone after hostile clients: %v\n%s", err, s.Logs())
	}
}

// Before AUTH, Redis' tighter limits apply; after it, the normal ones.
func TestUnauthenticatedLimits(t *testing.T) {
	s := StartServer(t, "--requirepass", "pw")
	big := "*2\r\n$4\r\nECHO\r\n$20000\r\n" + strings.Repeat("x", 20000) + "\r\n"
	if got := hostile(t, s.Addr, []byte(big), false); got != "-ERR Protocol error: unauthenticated bulk length\r\n" {
		t.Fatalf("big bulk before AUTH: %q", got)
	}
	many := "*11\r\n" + strings.Repeat("$1\r\na\r\n", 11)
	if got := hostile(t, s.Addr, []byte(many), false); got != "-ERR Protocol error: unauthenticated multibulk length\r\n" {
		t.Fatalf("11 arguments before AUTH: %q", got)
	}
	cn := dialRaw(t, s.Addr)
	cn.Write([]byte("AUTH pw\r\n" + big))
	r := bufio.NewReader(cn)
	if line, _ := r.ReadString('\n'); line != "+OK\r\n" {
		t.Fatalf("AUTH: %q", line)
	}
	if line, _ := r.ReadString('\n'); line != "$20000\r\n" {
		t.Fatalf("big ECHO after AUTH: %q", line)
	}
}

func TestRequirePassFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pass")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := StartServer(t, "--requirepass-file", file)
	if err := s.Client().Ping(ctx(t)).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("PING without AUTH: %v", err)
	}
	c := s.Client(func(o *redis.Options) { o.Password = "from-file" })
	if err := c.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("PING with the file's password: %v", err)
	}
}

// A client that pipelines far more reply than the limit is cut off alone.
// What the sockets take counts for nothing, as in Redis: replies are sent
// as a long batch builds them, so the pipeline must be longer than the
// kernel's buffers hold before its unsent replies pass the limit.
func TestOutputBufferLimit(t *testing.T) {
	// COMMAND DOCS is about 27 KB: one reply fits under the limit, a
	// thousand pipelined (27 MB) do not.
	s := StartServer(t, "--client-output-buffer-limit", "100000")
	one := len(hostile(t, s.Addr, []byte("COMMAND DOCS\r\nQUIT\r\n"), false))
	if one < 100000/4 || one > 100000 {
		t.Fatalf("COMMAND DOCS is only %d bytes: the test needs a reply near the limit", one)
	}
	// The client reads nothing until the server says it closed it.
	cn := dialRaw(t, s.Addr)
	defer cn.Close()
	if _, err := cn.Write([]byte(strings.Repeat("COMMAND DOCS\r\n", 1000))); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the client over the limit is closed", func() bool {
		return strings.Contains(s.Logs(), "closing client over the output buffer limit")
	})
	out, _ := io.ReadAll(cn)
	if len(out) >= 1000*(one-5) {
		t.Fatalf("client over the limit got all %d bytes", len(out))
	}
	if err := s.Client().Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("other clients must not notice: %v", err)
	}
}
