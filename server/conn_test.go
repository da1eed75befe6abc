package server

import (
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/clock"
	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/server/guard"
)

// A command that panics (here: a keyspace missing from its Env) is
// recovered: the client gets an error naming the command, and only its
// connection is marked for closing.
func TestCommandPanicIsRecovered(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler), table: commands.NewTable(machine.New(machine.Options{}))}
	s.clients.init()
	cs := &connState{}
	cs.conn.Authenticated = true
	env := &commands.Env{Table: s.table, Stats: &commands.Stats{}, Clock: clock.New(nil)} // no Keys
	cs.ctx = commands.Ctx{Env: env, Conn: &cs.conn, W: &cs.writer}
	args := [][]byte{[]byte("CL.THROTTLE"), []byte("k"), []byte("10"), []byte("10"), []byte("60")}
	s.run(cs, args)
	if !cs.closing {
		t.Fatalf("the connection of a panicking command stays open; reply %q", cs.writer.Buf)
	}
	if got := string(cs.writer.Buf); !strings.HasPrefix(got, "-ERR internal error running 'CL.THROTTLE'") {
		t.Fatalf("reply %q", got)
	}
}

// After a read deadline fires, readPending still finds bytes that wait in
// the socket (a starved process can see its deadline fire first), and
// finds none when the client really was idle.
func TestReadPendingAfterDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s := &Server{}
	cs := &connState{nc: nc}
	cs.out.init(nc)
	cs.framer, _ = guard.NewFramer(guard.DefaultLimits(), true)
	if n, err := s.readPending(cs); n != 0 || err != nil {
		t.Fatalf("idle client: %d bytes, %v", n, err)
	}
	client.Write([]byte("PING\r\n"))
	nc.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := nc.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read past its deadline: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := s.readPending(cs)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client's bytes never showed up")
		}
		time.Sleep(time.Millisecond) // polling for the bytes to cross loopback
	}
	if args, err := cs.framer.Next(); err != nil || len(args) != 1 || string(args[0]) != "PING" {
		t.Fatalf("after readPending: %q %v", args, err)
	}
}
