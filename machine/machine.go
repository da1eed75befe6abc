package machine

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/decide"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/machine/placement"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
)

// Options configure a Machine.
type Options struct {
	// Durable receives quota changes to write through to disk; nil when
	// nothing persists (tests, or a log that is itself durable).
	Durable Durability
	// Log receives the line a panicked apply logs with its stack; nil
	// discards.
	Log *slog.Logger
}

// Machine is the replicated state: every key and the last applied
// instant. Its methods are safe for concurrent use; applies to different
// slots run in parallel, and each slot sees time only go forward (the
// applied instant is raised under the slot's lock).
type Machine struct {
	keys *keyspace.Keyspace
	// applied is the last applied instant, Unix ns: the largest instant
	// any write has been applied at (or Advance moved it to).
	applied atomic.Int64
	// changes counts applied writes, refused ones included, since the
	// machine was made. Only applies move it (never CONFIG RESETSTAT), so
	// a snapshot can tell whether anything may have changed.
	changes atomic.Int64
	// level mirrors LevelKey: the log's apply level (levels).
	level   atomic.Uint32
	durable Durability
	log     *slog.Logger
	// limiters is the limiters' room (machine/limiters): their commands
	// and the time zones quotas have loaded.
	limiters *limiters.Room
	// frozen is the open point-in-time view, if any (see Freeze).
	frozen atomic.Pointer[Frozen]
	// The rooms' state (rooms.go): what each mirrors of its records,
	// and its pools. Only the room's own code reads its fields.
	decide    *decide.Room
	placement *placement.Room
	byName    map[string]*Command
	sorted    []*Command
}

// New returns an empty machine at instant 0.
func New(opts Options) *Machine {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Machine{keys: keyspace.New(), durable: opts.Durable, log: log, byName: map[string]*Command{}, limiters: limiters.New()}
	m.placement = placement.New(roomCore{m})
	m.decide = decide.New(decide.Options{Core: roomCore{m}, Keys: m.keys, Limiters: m.limiters, Placement: m.placement, Log: log})
	for _, r := range rooms() {
		for _, c := range r.commands(m) {
			if _, dup := m.byName[c.Name]; dup {
				panic("machine: duplicate command " + c.Name)
			}
			c.write = c.HasFlag("write")
			c.panics = make([]atomic.Int64, 1+len(c.subcommands))
			m.byName[c.Name] = c
			m.sorted = append(m.sorted, c)
		}
	}
	return m
}

// SetDurability sets where quota changes are journaled. Call it before
// the first apply (a store is opened after the machine it restores into).
// Records Restore moved to a new key (migrate.go) are journaled to it
// here.
func (m *Machine) SetDurability(d Durability) {
	m.durable = d
	if d == nil {
		return
	}
	for _, r := range rooms() {
		if r.durable != nil {
			r.durable(m, d)
		}
	}
}

// Keys is a read-only view of the keyspace, for what reads it outside an
// apply: SCAN, KEYS, cluster introspection, INFO, metrics. Such readers
// judge expiry at ReadInstant.
func (m *Machine) Keys() keyspace.View { return m.keys.View() }

// Store is the keyspace itself, for what restores it and snapshots it
// (persist, a Raft snapshot restore): the only writers besides an apply.
func (m *Machine) Store() *keyspace.Keyspace { return m.keys }

// Applied is the last applied instant, Unix ns.
func (m *Machine) Applied() int64 { return m.applied.Load() }

// Changes counts the writes applied since the machine was made.
func (m *Machine) Changes() int64 { return m.changes.Load() }

// Restore sets the applied instant of a machine just loaded from a
// snapshot, before anything is applied.
func (m *Machine) Restore(applied int64) {
	m.applied.Store(applied)
	for _, r := range rooms() {
		if r.restored != nil {
			r.restored(m, applied)
		}
	}
}

// ReadInstant is the instant a read given now is served at: now, or the
// applied instant when that is later. It moves nothing.
func (m *Machine) ReadInstant(now int64) int64 { return max(now, m.applied.Load()) }

// Advance applies the empty command at now: time moves to now (never
// back) and nothing else changes. It returns the applied instant. An idle
// server calls it so expired keys can be swept; a replicated leader logs
// it as an idle tick.
func (m *Machine) Advance(now int64) int64 { return m.advance(now) }

// advance raises the applied instant to now and returns the instant to
// apply at. Callers hold the lock of the slot they change, so two writes
// to one slot can never apply in the opposite order of their instants.
func (m *Machine) advance(now int64) int64 {
	for {
		last := m.applied.Load()
		if now <= last {
			return last
		}
		if m.applied.CompareAndSwap(last, now) {
			return now
		}
	}
}

// Sweep removes up to budget records that had expired grace before the
// applied instant, from cursor on (see keyspace.Sweep). Those keys already
// read as absent, so a sweep changes no reply, Digest or snapshot: any node
// may sweep whenever it likes without a log entry. A grace keeps the record
// of a key that comes back soon (a limiter between bursts) for Insert to
// overwrite in place, instead of removing it and appending a new one.
func (m *Machine) Sweep(cursor *keyspace.SweepCursor, budget int, grace time.Duration) (examined, removed int) {
	return m.keys.Sweep(m.applied.Load()-int64(grace), cursor, budget)
}

// Commands lists the machine's commands in table order, the internal
// ones (Command.Internal) included.
func (m *Machine) Commands() []*Command { return m.sorted }

// Lookup finds a command by name in any case; nil when the machine has
// no such command.
func (m *Machine) Lookup(name []byte) *Command {
	var buf [32]byte
	if len(name) > len(buf) {
		return m.byName[strings.ToLower(string(name))]
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return m.byName[string(buf[:len(name)])]
}

// Apply runs cmd with args (args[0] is its name as sent) at instant now
// and appends its one reply to w. The caller has checked the arity and,
// for a Journaled command, that the store can take the change.
func (m *Machine) Apply(now int64, cmd *Command, args [][]byte, w *resp.Writer) Outcome {
	var sc Scratch
	return m.ApplyScratch(&sc, now, cmd, args, w)
}

// Scratch is the working state of one apply. A connection keeps one and
// passes it to ApplyScratch, so an apply allocates nothing (the state
// escapes through the command's function value, so a local one would be
// allocated on every call).
type Scratch struct {
	x exec
	// bufs outlive each apply (x is cleared after one), so the buffers in
	// them are reused.
	bufs scratchBufs
}

// scratchBufs are buffers an apply reuses from the last one.
type scratchBufs struct {
	// lim are the limiters' buffers (a CONC command's leases, a sliding
	// log, an encoding); the other rooms reuse Enc and Log.
	lim limiters.Scratch
	// dec are the decide room's (a multi-limit check's sliding logs and
	// undo notes).
	dec decide.Scratch
	// Nothing an apply returns in its Outcome is kept here: the next apply
	// would overwrite what a caller on another goroutine still reads.
}

// ApplyScratch is Apply using sc for its working state; sc must not be
// used by two applies at once. A panic inside the command is recovered
// here (recover.go): the command answers an internal error and the machine
// goes on.
func (m *Machine) ApplyScratch(sc *Scratch, now int64, cmd *Command, args [][]byte, w *resp.Writer) Outcome {
	return m.applyScratch(sc, now, cmd, args, w, nil)
}

// applyScratch is ApplyScratch inside a transaction holding group's slots
// (nil: none).
func (m *Machine) applyScratch(sc *Scratch, now int64, cmd *Command, args [][]byte, w *resp.Writer, group *room.SlotLocks) (out Outcome) {
	sc.x = exec{m: m, now: now, write: cmd.write, w: w, group: group, bufs: &sc.bufs}
	if cmd.write {
		m.changes.Add(1)
	}
	start := len(w.Buf)
	defer func() {
		if p := recover(); p != nil {
			msg := m.recovered(&sc.x, cmd, args, p, start)
			// A change journaled before the panic is still waited for.
			out = Outcome{Ticket: sc.x.out.Ticket, Err: msg, Reason: ReasonInternal}
			sc.x = exec{}
		}
	}()
	if bad := m.fence(cmd, args); bad != "" {
		w.Error(bad)
		sc.x = exec{}
		return Outcome{Err: bad, Refusal: ErrFenced, Reason: ReasonNotNow}
	}
	cmd.run(&sc.x, args)
	out = sc.x.out
	sc.x = exec{}
	return out
}

// ApplyArgs is Apply for a command known only by its arguments, as a
// replication log carries it: an unknown command or a wrong number of
// arguments is an error reply, and changes nothing.
func (m *Machine) ApplyArgs(now int64, args [][]byte, w *resp.Writer) Outcome {
	var sc Scratch
	return m.ApplyArgsScratch(&sc, now, args, w)
}

// firstWord is args' first word, nil for none.
func firstWord(args [][]byte) []byte {
	if len(args) == 0 {
		return nil
	}
	return args[0]
}

// ApplyArgsScratch is ApplyArgs using sc for its working state, as
// ApplyScratch does.
func (m *Machine) ApplyArgsScratch(sc *Scratch, now int64, args [][]byte, w *resp.Writer) Outcome {
	var bad string
	switch cmd := m.Lookup(firstWord(args)); {
	case len(args) == 0:
		bad = "ERR empty command"
	case cmd == nil:
		bad = "ERR unknown command '" + resp.Clip(args[0], 128) + "'"
	case !cmd.ArityOK(len(args)):
		bad = resp.ErrArity(cmd.Name)
	default:
		return m.ApplyScratch(sc, now, cmd, args, w)
	}
	w.Error(bad)
	return Outcome{Err: bad, Reason: ReasonInvalid}
}

// Check parses a command known only by its arguments as its apply would,
// without the state: "" when it is well-formed, else the error reply its
// apply would give (unknown command, arity, numbers, ranges, options). A
// replicated node checks every command before it enters the log, so a
// malformed one never costs a log entry; the apply checks again, so a log
// written by another version cannot make it misbehave.
func (m *Machine) Check(args [][]byte) string {
	if len(args) == 0 {
		return "ERR empty command"
	}
	cmd := m.Lookup(args[0])
	switch {
	case cmd == nil:
		return "ERR unknown command '" + resp.Clip(args[0], 128) + "'"
	case !cmd.ArityOK(len(args)):
		return resp.ErrArity(cmd.Name)
	}
	return cmd.Check(args)
}
