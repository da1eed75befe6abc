package tests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// startLimited runs sluice like StartServer, under an open-files limit of
// nofile (set by the shell that execs it, as `ulimit -n` would).
func startLimited(t *testing.T, nofile int, extra ...string) *Server {
	t.Helper()
	s := &Server{t: t, DataDir: t.TempDir(), Addr: freeAddr(t)}
	s.Args = append([]string{"--addr", s.Addr, "--data-dir", s.DataDir}, extra...)
	script := fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile)
	s.cmd = exec.Command("bash", append([]string{"-c", script, binary}, s.Args...)...)
	s.logs = &logBuffer{}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.exited = make(chan struct{})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			s.logs.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "sluice ready") {
				once = true
				close(ready)
			}
		}
		s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(s.Kill)
	select {
	case <-ready:
	case <-s.exited:
		t.Fatalf("sluice exited before it was ready:\n%s", s.logs.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("sluice not ready after 20s:\n%s", s.logs.String())
	}
	return s
}

// Issue 11 row 3: with 64 descriptors and 80 clients, every client gets an
// answer (PONG, or the maxclients refusal), none hangs, and the server says
// at startup that it lowered maxclients to fit.
func TestDescriptorLimitRefusesExcessClients(t *testing.T) {
	s := startLimited(t, 64)
	const clients = 80
	replies := make([]string, clients)
	conns := make([]net.Conn, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", s.Addr, 10*time.Second)
			if err != nil {
				replies[i] = "dial: " + err.Error()
				return
			}
			conns[i] = c
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write([]byte("PING\r\n"))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				line += "read: " + err.Error()
			}
			replies[i] = line
		}()
	}
	wg.Wait() // every client stays connected until all have answers
	pong, refused := 0, 0
	for i, r := range replies {
		switch r {
		case "+PONG\r\n":
			pong++
		case "-ERR max number of clients reached\r\n":
			refused++
		default:
			t.Errorf("client %d: %q", i, r)
		}
	}
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	if pong == 0 || refused == 0 {
		t.Fatalf("%d PONG, %d refused: want both", pong, refused)
	}
	if !strings.Contains(s.Logs(), "maxclients lowered to fit the open files limit") {
		t.Fatalf("no warning about maxclients above the descriptor limit:\n%s", s.Logs())
	}
	if n := strings.Count(s.Logs(), "accept"); n > 10 {
		t.Fatalf("%d accept log lines: the accept loop spins", n)
	}
	// The clients that left make room again.
	eventually(t, "a new client is served once the others left", func() bool {
		c, err := net.Dial("tcp", s.Addr)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte("PING\r\n"))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line == "+PONG\r\n"
	})
}

// Issue 11 row 8: --timeout closes idle connections only: one sending a
// request a byte at a time, or a large bulk slowly, is served.
func TestIdleTimeoutSparesSlowSenders(t *testing.T) {
	s := StartServer(t, "--timeout", "1s", "--log-level", "debug")
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	rd := bufio.NewReader(c)
	// 14 bytes, 200 ms apart: 2.8 s for one request.
	for _, b := range []byte("*1\r\n$4\r\nPING\r\n") {
		if _, err := c.Write([]byte{b}); err != nil {
			t.Fatalf("slow sender cut off: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // the pace is the test: a byte every 200 ms
	}
	if line, err := rd.ReadString('\n'); line != "+PONG\r\n" {
		t.Fatalf("PING sent a byte at a time: %q %v", line, err)
	}
	// 40 MB at about 20 MB/s.
	const size = 40 << 20
	fmt.Fprintf(c, "*2\r\n$4\r\nECHO\r\n$%d\r\n", size)
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	go func() {
		for range size / len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond) // the pace is the test
		}
		c.Write([]byte("\r\n"))
	}()
	if line, err := rd.ReadString('\n'); line != fmt.Sprintf("$%d\r\n", size) {
		t.Fatalf("40 MB bulk sent at 20 MB/s: %q %v; server log:\n%s", line, err, s.Logs())
	}
	if n, err := io.CopyN(io.Discard, rd, size+2); err != nil {
		t.Fatalf("echo cut after %d bytes: %v; server log:\n%s", n, err, s.Logs())
	}
	// An idle connection is still closed.
	idle := dialRaw(t, s.Addr)
	if n, err := idle.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %d bytes, %v; want EOF", n, err)
	}
}

// Issue 11 row 9: before AUTH, an inline request is held to the limits a
// multibulk one is.
func TestUnauthenticatedInlineLimits(t *testing.T) {
	s := StartServer(t, "--requirepass", "pw")
	if got := hostile(t, s.Addr, []byte("a b c d e f g h i j k\r\n"), false); got != "-ERR Protocol error: unauthenticated multibulk length\r\n" {
		t.Fatalf("inline request of 11 words before AUTH: %q", got)
	}
	if got := hostile(t, s.Addr, []byte("ECHO "+strings.Repeat("x", 20000)+"\r\n"), false); got != "-ERR Protocol error: unauthenticated bulk length\r\n" {
		t.Fatalf("inline request of 20 KB before AUTH: %q", got)
	}
	// After AUTH, inline requests have the full limits.
	c := dialRaw(t, s.Addr)
	c.Write([]byte("AUTH pw\r\nECHO " + strings.Repeat("x", 20000) + "\r\n"))
	rd := bufio.NewReader(c)
	if line, _ := rd.ReadString('\n'); line != "+OK\r\n" {
		t.Fatalf("AUTH: %q", line)
	}
	if line, _ := rd.ReadString('\n'); line != "$20000\r\n" {
		t.Fatalf("inline ECHO of 20 KB after AUTH: %q", line)
	}
}

// Issue 11 row 10: a client that pipelines without reading is closed once
// its unsent replies pass the limit, though no single read brings in
// requests whose replies would.
func TestOutputBufferLimitCountsUnsentReplies(t *testing.T) {
	s := StartServer(t, "--client-output-buffer-limit", "1000000")
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// COMMAND DOCS answers about 27 KB; one request per write, never read.
	// The writes are paced so that each read brings in one request: the
	// replies of no single read come near the limit, only the backlog does.
	deadline := time.Now().Add(60 * time.Second)
	for sent := 0; ; sent++ {
		time.Sleep(10 * time.Millisecond) // the pace is the test
		if time.Now().After(deadline) {
			t.Fatalf("still connected after %d requests whose replies were never read", sent)
		}
		c.SetWriteDeadline(time.Now().Add(time.Second))
		_, err := c.Write([]byte("COMMAND DOCS\r\n"))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue // the server is not reading: keep waiting for the verdict
		}
		if err != nil {
			break // closed by the server
		}
	}
	eventually(t, "the server logs the limit", func() bool { return strings.Contains(s.Logs(), "output buffer limit") })
	if err := s.Client().Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("other clients must not notice: %v", err)
	}
}

// CONFIG SET timeout reaches connections that are already waiting idle, as
// in Redis, not only those that read again.
func TestConfigSetTimeoutClosesWaitingIdleClients(t *testing.T) {
	s := StartServer(t)
	idle := dialRaw(t, s.Addr)
	idle.Write([]byte("PING\r\n"))
	rd := bufio.NewReader(idle)
	if line, err := rd.ReadString('\n'); line != "+PONG\r\n" {
		t.Fatalf("PING: %q %v", line, err)
	}
	// The server now waits in a read on idle, with no timeout.
	if err := s.Client().ConfigSet(ctx(t), "timeout", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rd.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection after CONFIG SET timeout 1: read %d bytes, %v; want EOF", n, err)
	}
}
