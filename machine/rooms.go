package machine

import (
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/decide"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/machine/placement"
	"github.com/sluice-rl/sluice/machine/room"
)

// The machine's rooms. The core (the apply rule, the command table, the
// keyspace's kinds, snapshots) names no room: each room declares what it
// adds — commands, kinds of record, what it reloads after a restore — and
// this file, the assembly, is the one place that lists them all. See
// docs/design/machine-rooms.md for where this is going: each room its own
// package, the assembly a facade.

// roomHooks is one concern of the machine as the core sees it.
type roomHooks struct {
	// commands are the commands the room adds to m's table.
	commands func(m *Machine) []*Command
	// restored, when set, reloads what the room mirrors from the
	// keyspace, once a restore has loaded it (applied is its instant).
	restored func(m *Machine, applied int64)
	// flushed, when set, puts back the configuration the room mirrors
	// (a flush drops every key; configuration is not data). The records
	// of kinds marked kept are put back by the core.
	flushed func(x *exec)
	// durable, when set, is told the machine's durable store once it has
	// one (what a restore changed and must journal).
	durable func(m *Machine, d Durability)
}

// rooms are the machine's rooms, in the order their commands are listed
// and their restores run.
func rooms() []roomHooks {
	return []roomHooks{limitersRoom(), decideRoom(), placementRoom(), coreRoom()}
}

// kinds are every room's kinds of record.
var kinds = newKindTable(limiters.Kinds(), decide.Kinds(), placement.Kinds(), coreKinds())

func limitersRoom() roomHooks {
	return roomHooks{commands: func(m *Machine) []*Command {
		return bind(m.limiters.Commands(), func(x *exec) limiters.Exec { return x })
	}}
}

// bind adds a room's commands to the core's table: each runs with the
// apply seen as the room's view X (as gives it: the apply itself, which
// implements X).
func bind[X any](cmds []room.Command[X], as func(*exec) X) []*Command {
	out := make([]*Command, len(cmds))
	for i := range cmds {
		rc := cmds[i]
		c := &Command{Spec: rc.Spec, Decides: rc.Decides, Journaled: rc.Journaled, slots: rc.Slots,
			internal: rc.Internal, fromMember: rc.FromMember, everyGroup: rc.EveryGroup,
			keys: rc.Keys, route: rc.Route, subcommands: rc.Subcommands}
		c.run = func(x *exec, args [][]byte) { rc.Run(as(x), args) }
		if rc.Check != nil {
			c.check = rc.Check
		}
		if rc.Stores != nil {
			c.stores = func(m *Machine, args [][]byte, now int64) bool { return rc.Stores(m, args, now) }
		}
		out[i] = c
	}
	return out
}

func decideRoom() roomHooks {
	return roomHooks{
		commands: func(m *Machine) []*Command {
			return bind(m.decide.Commands(), func(x *exec) decide.Exec { return x })
		},
		restored: func(m *Machine, applied int64) { m.decide.Restored(applied, m.durable) },
		flushed:  func(x *exec) { x.m.decide.Flushed(x) },
		durable:  func(m *Machine, d Durability) { m.decide.Durable(d) },
	}
}

func placementRoom() roomHooks {
	return roomHooks{
		commands: func(m *Machine) []*Command {
			return bind(m.placement.Commands(), func(x *exec) placement.Exec { return x })
		},
		restored: func(m *Machine, _ int64) { m.placement.Restored() },
		flushed:  func(x *exec) { x.m.placement.Flushed(x) },
	}
}

// roomCore is what a room reads of its machine outside an apply
// (placement.Core).
type roomCore struct{ m *Machine }

func (c roomCore) Store() *keyspace.Keyspace { return c.m.keys }
func (c roomCore) Applied() int64            { return c.m.applied.Load() }
func (c roomCore) AppendState(dst []byte, s *keyspace.Slot, e keyspace.Entry) ([]byte, error) {
	return AppendState(dst, s, e)
}
func (c roomCore) DecodeState(kind keyspace.Kind, b []byte) (any, error) {
	return DecodeState(kind, b, c.m.limiters.Zone)
}
func (c roomCore) StoreState(s *keyspace.Slot, key []byte, kind keyspace.Kind, word int64, obj any) error {
	return StoreState(s, key, kind, word, obj)
}
func (c roomCore) KindName(kind keyspace.Kind) string { return KindName(kind) }
func (c roomCore) ReadInstant(now int64) int64        { return c.m.ReadInstant(now) }
func (c roomCore) Level() uint32                      { return c.m.level.Load() }
func (c roomCore) EncodeState(dst []byte, kind keyspace.Kind, obj any) ([]byte, error) {
	return EncodeState(dst, kind, obj)
}

// Lookup is the command of the table named name (decide.Core).
func (c roomCore) Lookup(name []byte) decide.TableCommand {
	if cmd := c.m.Lookup(name); cmd != nil {
		return cmd
	}
	return nil
}
func (c roomCore) Journaled(kind keyspace.Kind) bool { return Journaled(kind) }
