package server

import (
	"log/slog"
	"strings"
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
	s.clients.init()
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
