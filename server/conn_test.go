package server

import (
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-rl/sluice/clock"
	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/machine"
)

// A command that panics (here: a keyspace missing from its Env) is
// recovered: the client gets an error naming the command, and only its
// connection is marked for closing.
func TestCommandPanicIsRecovered(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler), table: commands.NewTable(machine.New(machine.Options{}))}
	s.clients.init(new(atomic.Int64))
	cs := &connState{}
	cs.conn.Authenticated = true
	env := &commands.Env{Table: s.table, Stats: &commands.Stats{}, Clock: clock.New(nil)} // no Keys
	cs.ctx = commands.Ctx{Env: env, Conn: &cs.conn, W: &cs.writer}
	args := [][]byte{[]byte("CL.THROTTLE"), []byte("k"), []byte("10"), []byte("10"), []byte("60")}
	s.run(cs, s.table.Lookup(args[0]), args)
	if !cs.closing {
		t.Fatalf("the connection of a panicking command stays open; reply %q", cs.writer.Buf)
	}
	if got := string(cs.writer.Buf); !strings.HasPrefix(got, "-ERR internal error running 'CL.THROTTLE'") {
		t.Fatalf("reply %q", got)
	}
}

// A connection killed while its command runs aside leaves connected_clients
// at the kill; its loop's drop, when the command ends, does not take it out
// a second time. One dropped without a kill counts out once too.
func TestKilledConnectionCountedOutOnce(t *testing.T) {
	var connected atomic.Int64
	var r clientRegistry
	r.init(&connected)
	register := func(id int64) *connState {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		cs := &connState{}
		cs.conn.ID = id
		connected.Add(1) // as admission counts it
		if !r.add(cs, a) {
			t.Fatal("registry closed")
		}
		return cs
	}
	killed, plain := register(1), register(2)
	if n := r.Kill(func(ci *commands.ClientInfo) bool { return ci.ID == 1 }); n != 1 {
		t.Fatalf("killed %d", n)
	}
	if got := connected.Load(); got != 1 {
		t.Fatalf("after the kill: %d connected, want 1", got)
	}
	r.uncount(killed) // its loop drops it once the command ends
	r.uncount(plain)
	r.uncount(plain)
	if got := connected.Load(); got != 0 {
		t.Fatalf("after both drops: %d connected, want 0", got)
	}
}
