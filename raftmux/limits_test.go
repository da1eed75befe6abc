package raftmux

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A flood of connections that send only a header — with or without the
// cluster's secret — holds no more than the limits: past MaxPending or
// MaxConns a connection is closed at once, a pending one when its
// handshake deadline passes, and a member dialing afterwards is served.
// The refusals are counted and said in one log line, which carries no
// byte a peer sent.
func TestLimitsHoldAgainstAFlood(t *testing.T) {
	for _, secret := range [][]byte{nil, []byte("0123456789abcdef0123")} {
		var logs bytes.Buffer
		limits := Limits{MaxConns: 16, MaxPending: 8, Handshake: 300 * time.Millisecond}
		m, err := ListenAs("127.0.0.1:0", nil, Guard{Secret: secret, Limits: limits}, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		layer, _ := m.Members("g1")
		addr := m.Addr().String()
		var flood []net.Conn
		for range 200 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			if len(flood)%10 == 0 {
				c.Write(header(route{Member, "g1\x1b[31mevil"}, false)) // not hosted, and bytes no log may echo
			} else {
				c.Write(header(route{Member, "g1"}, false))
			}
			flood = append(flood, c)
			if open, pending := m.Conns(); open > int64(limits.MaxConns) || pending > int64(limits.MaxPending) {
				t.Fatalf("secret %v: %d held, %d pending: past the limits %+v", secret != nil, open, pending, limits)
			}
		}
		for _, c := range flood[:50] {
			c.Close()
		}
		// Silent after a good header: closed at the handshake deadline.
		for _, c := range flood[50:] {
			c.Close()
		}
		for _, p := m.Conns(); p > 0; _, p = m.Conns() {
			time.Sleep(10 * time.Millisecond) // the flood's last ones being closed
		}
		silent := make([]net.Conn, 0, limits.MaxPending)
		for len(silent) < limits.MaxPending {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c.Write(header(route{Member, "g1"}, false))
			silent = append(silent, c)
		}
		for _, c := range silent {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadAll(c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("a silent connection was not closed: %v", err)
			}
		}
		// The last one's count drops just after its close is seen.
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			open, pending := m.Conns()
			if pending == 0 {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("after the deadline: %d held, %d still pending", open, pending)
			}
		}
		// A member is served.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if c, err := DialMember(ctx, addr, "g1", Guard{Secret: secret}); err == nil {
				c.Write([]byte("call"))
				c.Close()
			}
		}()
		c, err := layer.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(c); string(got) != "call" {
			t.Fatalf("the member's call read %q", got)
		}
		c.Close()
		refused := m.Refused()
		if refused["over_max_pending"]+refused["over_max_conns"] == 0 || refused["silent"]+refused["not_proven"] == 0 {
			t.Fatalf("refusals counted: %v", refused)
		}
		if strings.Contains(logs.String(), "evil") || strings.Count(logs.String(), "connections refused") > 2 {
			t.Fatalf("the log:\n%s", logs.String())
		}
		m.Close()
	}
}
