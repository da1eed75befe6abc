// Package machine is sluice's replicated state machine: the keyspace, the
// last applied instant, and the commands that read or change them.
//
// # The apply rule
//
// State changes only through Apply(now, command): a deterministic function
// of the state, the command's arguments and the instant it is applied at.
// Time moves only there: a write applies at max(now, last applied) and
// that becomes the last applied instant; a read sees the same instant and
// moves nothing. Nothing inside Apply reads a clock, the disk, the host's
// time zone files or any other host setting; integers only, no map order,
// no hash seed in any result. So two machines given the same commands at
// the same instants answer alike and hold the same state (Digest), which
// is what replication relies on: it ships exactly (commands, instant).
//
// What the rule implies:
//   - Reads never change state. A key that has expired at the applied
//     instant reads as absent and stays in memory until a write reuses its
//     name or Sweep removes it. Sweep removes only records that are already
//     invisible at the applied instant, so it changes nothing any command,
//     Digest or snapshot can observe, and needs no log entry.
//   - An idle machine's time moves by Advance: an apply with no command, as
//     a replicated leader's idle tick is.
//   - Whether a change can be made durable is decided before Apply (see
//     Command.Journaled), never inside it: a disk that fills must not make
//     two replicas answer differently.
//   - Time zones come only from the tz database compiled into the binary
//     (package quota), never the host's.
//   - One command never stops the machine: a panic inside an apply is
//     recovered there (recover.go) and answered as an internal error, its
//     slot locks released; every slot lock a command takes goes through
//     exec.LockSlot and exec.Unlock so the boundary knows what to release.
//   - Check parses a command without the state, exactly as its apply
//     would, so a replicated node logs only well-formed commands.
//
// Its tests include scripts in testdata/apply (datadriven_test.go):
// commands at instants, and what the machine answers and holds.
//
// # Where things are
//
// The core, here: machine.go (Apply, Check, Advance, Sweep), exec.go (one
// apply: its instant, its slot locks; it implements every room's Exec),
// command.go (the command table: arity, keys, slots), rooms.go (the
// assembly: the one file that lists the rooms and binds their commands),
// outcome.go (an apply's Outcome and its typed results), recover.go (a
// panic as a reply), tx.go (EXEC of a MULTI), durable.go (what must reach
// disk), freeze.go (a point-in-time view for snapshots), fence.go (the
// slots a group's log owns, refused otherwise), level.go (the log's apply
// level, so members of two releases apply alike during a rolling
// upgrade), stores.go (whether a command would add a record, for
// maxmemory), keys.go (DEL, EXISTS, TTL, FLUSHALL …), kinds.go (each
// kind's TYPE name and snapshot encoding, gathered from the rooms),
// errors.go, reason.go and redirect.go (an error as a reply, why, typed;
// MOVED, TRYAGAIN, CLUSTERDOWN as typed refusals), placement.go (what one
// group asks of another's log besides parts), digest.go (DEBUG DIGEST),
// debug.go. placement_api.go and decide_api.go are the rooms' names as
// callers outside have always used them.
//
// The rooms, each a package that never imports this one: it sees an apply
// through its own Exec interface, which the core's exec implements, and
// declares its commands and kinds of record in package machine/room, the
// contract.
//   - machine/limiters: CL.THROTTLE, SW/FW.CHECK, CONC.*, QUOTA.*.
//   - machine/decide: rules, overrides and scales (RL.RULES, RL.OVERRIDE,
//     RL.SCALE), deciding several limits at one instant (RL.CHECK,
//     RL.CHECKALL, RL.SHOULDRATELIMIT), and the decisions that hold:
//     reservations (RL.RESERVE, RL.SETTLE, RL.CANCEL), leases (RL.LEASE),
//     a group's part of a check across groups (RL.PART), a group's
//     configuration given to a migration's target (SLUICE.CONFIG).
//   - machine/placement: a sharded group's ownership (SLUICE.OWN), its
//     slot migrations and their exports, the groups of a running cluster.
//
// docs/design/machine-rooms.md is how the rooms were cut out, and what
// is left.
//
// The connection and server surface (CLIENT, CONFIG, INFO, HELLO, AUTH,
// COMMAND, DEBUG …) lives in package commands and never reaches the
// machine. Each kind's TYPE name and snapshot encoding is declared by its
// room (room.Kind) and gathered in one table, kinds.go.
package machine
