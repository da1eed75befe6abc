package tests

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Issue #43: silent connections cannot lock out clients that know the
// password. Under ulimit -n 400 (maxclients 368), 250 connections that
// never authenticate keep at most half of maxclients (the oldest are
// closed for newer ones); a client that authenticated first is never
// among those closed; redis-cli with the password is answered at once;
// --auth-timeout then closes every silent one.
func TestUnauthenticatedClientsAreBounded(t *testing.T) {
	s := startLimited(t, 400, "--requirepass", "s3cret", "--auth-timeout", "3s")
	early := dialRaw(t, s.Addr)
	r := bufio.NewReader(early)
	early.Write([]byte("AUTH s3cret\r\n"))
	if l, _ := r.ReadString('\n'); l != "+OK\r\n" {
		t.Fatalf("AUTH: %q", l)
	}

	silent := holdConns(t, s.Addr, 250, []byte{}, nil)
	silent = stillOpen(silent)
	if len(silent) > 368/2 {
		t.Fatalf("%d unauthenticated connections held (at most %d)", len(silent), 368/2)
	}
	t.Logf("%d of 250 silent connections held", len(silent))

	start := time.Now()
	out, err := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", portOf(s.Addr), "-a", "s3cret", "--no-auth-warning", "PING").CombinedOutput()
	if took := time.Since(start); err != nil || strings.TrimSpace(string(out)) != "PONG" || took > 2*time.Second {
		t.Fatalf("redis-cli PING beside the silent connections: %q %v after %v", out, err, took)
	}
	early.SetDeadline(time.Now().Add(2 * time.Second))
	early.Write([]byte("PING\r\n"))
	if l, err := r.ReadString('\n'); l != "+PONG\r\n" {
		t.Fatalf("the client that authenticated first: %q %v", l, err)
	}
	early.SetDeadline(time.Time{})
	allClosed(t, "silent unauthenticated connections", silent, 6*time.Second)
	early.Write([]byte("PING\r\n"))
	if l, err := r.ReadString('\n'); l != "+PONG\r\n" {
		t.Fatalf("the authenticated client after the auth timeout: %q %v", l, err)
	}
}
