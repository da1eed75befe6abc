package machine

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// A transaction (MULTI … EXEC at the server surface) reaches the machine as
// one internal command, so it applies as one step — through one log entry
// when replicated — and no other apply sees it half done:
//
//	EXEC <watched> [<key> <version>]… [<argc> <arg>…]…
//
// It locks every slot its commands and watched keys touch, in slot order
// (every slot when one of them works on all: FLUSHALL, FLUSHDB, DBSIZE),
// then checks that each watched key still has the version WATCH saw
// (KeyVersion) — a nil reply, and nothing applied, when one changed — and
// applies the commands in order, replying with the array of their replies.
// A panic in one command is its own internal error, as anywhere.

func txCommands() []*Command {
	return []*Command{{
		Spec: cmdspec.Spec{Name: "exec", Arity: -2, Flags: []string{"write", "denyoom"},
			Group: "transactions", Since: "1.2.0", Complexity: "O(N) in the commands and watched keys",
			Summary: "A transaction as the machine applies it: <watched> [<key> <version>]... then <argc> <args>... per command."}, stores: neverStores, internal: true,
		run:   runTx,
		check: func(args [][]byte) string { _, bad := parseTx(args); return bad },
	}}
}

// txRequest is a parsed EXEC: the watched keys with their versions, and
// the commands (slices of the arguments).
type txRequest struct {
	watched  [][2][]byte
	commands [][][]byte
}

// MaxTxCommands bounds the commands of one transaction; a connection's
// MULTI queue holds no more (commands.MaxTxBytes bounds its bytes).
const MaxTxCommands = 100_000

func parseTx(args [][]byte) (txRequest, string) {
	var req txRequest
	n, ok := resp.ParseInt(args[1])
	if !ok || n < 0 || 2*n > int64(len(args)-2) {
		return req, "ERR syntax error: EXEC <watched> [<key> <version>]... [<argc> <arg>...]..."
	}
	i := 2
	for range n {
		req.watched = append(req.watched, [2][]byte{args[i], args[i+1]})
		i += 2
	}
	for i < len(args) {
		argc, ok := resp.ParseInt(args[i])
		if !ok || argc < 1 || argc > int64(len(args)-i-1) {
			return req, "ERR syntax error: a transaction's command is <argc> <arg>..."
		}
		if len(req.commands) == MaxTxCommands {
			return req, "ERR too many commands in one transaction (at most 100000)"
		}
		req.commands = append(req.commands, args[i+1:i+1+int(argc)])
		i += 1 + int(argc)
	}
	return req, ""
}

// slotsOf adds to l the slots a command touches, as its table entry
// declares them (Command.Slots).
func (m *Machine) slotsOf(l *room.SlotLocks, cmd *Command, args [][]byte) {
	var all bool
	l.Slots, all = cmd.Slots(l.Slots, args)
	l.All = l.All || all
}

// runTx is EXEC (see above).
func runTx(x *exec, args [][]byte) {
	start := len(x.w.Buf)
	req, bad := parseTx(args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	l := &room.SlotLocks{}
	l.Reset(x.m.keys)
	for _, w := range req.watched {
		l.Slots = append(l.Slots, slot.Of(w[0]))
	}
	for _, c := range req.commands {
		if cmd := x.m.Lookup(c[0]); cmd != nil && cmd.ArityOK(len(c)) {
			x.m.slotsOf(l, cmd, c)
		}
	}
	l.Lock()
	defer l.Unlock()
	now := x.Instant()
	for _, w := range req.watched {
		if string(keyVersion(l.Slot(slot.Of(w[0])), w[0], now)) != string(w[1]) {
			x.w.NullArray() // a watched key changed: nothing applies
			return
		}
	}
	x.w.Array(len(req.commands))
	// The boundaries leave the apply (Outcome.Parts): the caller's.
	parts := make([]int, 1, len(req.commands)+1)
	parts[0] = len(x.w.Buf) - start
	var sc Scratch
	for _, c := range req.commands {
		out := x.m.applyInTx(&sc, l, x.now, c, x.w)
		if out.Limited {
			x.out.Limited = true
		}
		x.journaled(out.Ticket)
		parts = append(parts, len(x.w.Buf)-start)
	}
	x.out.Parts = parts
}

// applyInTx is ApplyArgs for one command of a transaction holding l.
func (m *Machine) applyInTx(sc *Scratch, l *room.SlotLocks, now int64, args [][]byte, w *resp.Writer) Outcome {
	cmd := m.Lookup(args[0])
	switch {
	case cmd == nil:
		w.Error("ERR unknown command '" + resp.Clip(args[0], 128) + "'")
		return Outcome{}
	case !cmd.ArityOK(len(args)):
		w.Error(resp.ErrArity(cmd.Name))
		return Outcome{}
	case cmd.Name == "exec":
		w.Error("ERR EXEC inside a transaction")
		return Outcome{}
	}
	return m.applyScratch(sc, now, cmd, args, w, l)
}

// KeyVersion identifies the state of key at now as WATCH sees it: "-" when
// it is absent (or expired), else a hash of its kind, word and state. A
// transaction applies only if every watched key has the same version then.
func (m *Machine) KeyVersion(key []byte, now int64) string {
	s := m.keys.LockKey(key)
	defer s.Unlock()
	return string(keyVersion(s, key, m.ReadInstant(now)))
}

func keyVersion(s *keyspace.Slot, key []byte, now int64) []byte {
	e, ok := s.Get(key, now)
	if !ok {
		return []byte("-")
	}
	b := []byte{byte(e.Kind())}
	b = strconv.AppendInt(b, s.Word(e), 10)
	b, err := AppendState(b, s, e)
	if err != nil {
		b = append(b, err.Error()...)
	}
	sum := sha256.Sum256(b)
	return []byte(hex.EncodeToString(sum[:12]))
}
