package server

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"
)

// remoteListener reports every accepted connection as coming from addr.
type remoteListener struct {
	net.Listener
	addr net.Addr
}

func (l remoteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return remoteConn{c, l.addr}, nil
}

type remoteConn struct {
	net.Conn
	addr net.Addr
}

func (c remoteConn) RemoteAddr() net.Addr { return c.addr }

// NetConn is the socket beneath, which the server takes over.
func (c remoteConn) NetConn() net.Conn { return c.Conn }

func serveFrom(t *testing.T, cfg Config, from net.Addr) string {
	t.Helper()
	cfg.DataDir = t.TempDir()
	s, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ListenOn(remoteListener{ln, from}); err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("PING\r\n"))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line
}

func TestProtectedMode(t *testing.T) {
	outside := &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 5000}
	inside := &net.TCPAddr{IP: net.ParseIP("::1"), Port: 5000}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	if got := serveFrom(t, cfg, outside); len(got) < 8 || got[:8] != "-DENIED " {
		t.Fatalf("outside client without a password got %q, want -DENIED", got)
	}
	if got := serveFrom(t, cfg, inside); got != "+PONG\r\n" {
		t.Fatalf("loopback client got %q", got)
	}
	withPass := cfg
	withPass.RequirePass = "pw"
	if got := serveFrom(t, withPass, outside); got != "-NOAUTH Authentication required.\r\n" {
		t.Fatalf("outside client with a password set got %q", got)
	}
	off := cfg
	off.ProtectedMode = false
	if got := serveFrom(t, off, outside); got != "+PONG\r\n" {
		t.Fatalf("protected mode off: %q", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"bad addr":       func(c *Config) { c.Addr = "nope" },
		"no data dir":    func(c *Config) { c.DataDir = "" },
		"log level":      func(c *Config) { c.LogLevel = "loud" },
		"max clients":    func(c *Config) { c.MaxClients = 0 },
		"negative idle":  func(c *Config) { c.IdleTimeout = -time.Second },
		"bulk len":       func(c *Config) { c.Protocol.MaxBulkLen = 0 },
		"output buffer":  func(c *Config) { c.OutputBufferLimit = -1 },
		"sweep interval": func(c *Config) { c.SweepInterval = 0 },
		"negative spin":  func(c *Config) { c.LoopSpin = -time.Microsecond },
		"long spin":      func(c *Config) { c.LoopSpin = 2 * time.Millisecond },
	} {
		c := DefaultConfig()
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}
