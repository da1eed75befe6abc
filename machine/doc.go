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
//     exec.lockKey and exec.unlock so the boundary knows what to release.
//   - Check parses a command without the state, exactly as its apply
//     would, so a replicated node logs only well-formed commands.
//
// Its tests include scripts in testdata/apply (datadriven_test.go):
// commands at instants, and what the machine answers and holds.
//
// # Where things are
//
//   - The machine and its apply: machine.go (Apply, Check, Advance, Sweep),
//     exec.go (one apply: its instant, its slot locks), command.go (the
//     command table: arity, keys, slots), rooms.go (the assembly: the one
//     file that lists the rooms and binds their commands; room_*.go say
//     what each room adds), outcome.go (an apply's Outcome and its typed
//     results), recover.go (a panic as a reply),
//     tx.go (EXEC of a MULTI), undo.go (all limits charged or none),
//     durable.go (what must reach disk), freeze.go (a point-in-time view
//     for snapshots), migrate.go (records of older versions on restore).
//
//   - The limiters are a room of their own, package machine/limiters
//     (CL.THROTTLE, SW/FW.CHECK, CONC.*, QUOTA.*), which sees an apply
//     through limiters.Exec; package machine/room is the contract every
//     room is declared in. Here: checkall.go (RL.CHECKALL), keys.go (DEL,
//     EXISTS, TTL …).
//
//   - Rules and policy checks: policy.go (RL.CHECK), decide.go and
//     multicheck.go (planning and deciding several limits at one instant),
//     rls.go (RL.SHOULDRATELIMIT, Envoy's request), policy_admin.go and
//     policy_state.go (RL.RULES, RL.OVERRIDE, RL.SCALE and their state),
//     result.go (the typed results the doors format).
//
//   - Reservations: reserve.go (RL.RESERVE and the holder that keeps a
//     head and, in a sharded group, a part per counter's slot), settle.go
//     (RL.SETTLE, RL.CANCEL, a part's settle or cancel, and the never-lax
//     refunds), reservation.go (the records: encoding, keys, reads).
//
//   - Placement in a sharded cluster: fence.go (the group's ownership: the
//     slots its log owns, refused otherwise; the core's), ownership.go
//     (SLUICE.OWN), slotjobs.go and slotmove.go
//     (slot migration jobs: cut, import, moved, and the slots' export),
//     groups.go (the groups added to a running cluster), part.go (a group's
//     part of a check across groups: RL.PART, and Split, how a check is
//     cut by group), partrequest.go (a part typed as members send it, its
//     typed result, the refusals members act on: ErrFenced,
//     ErrRulesDiffer, ErrHeldElsewhere, ErrHeldOther), placement.go (what
//     one group asks of another's log besides parts: an import, a
//     configuration copy, configuration for every group, a rules digest),
//     config_copy.go (SLUICE.CONFIG: a group's configuration given to a
//     migration's target).
//
//   - Versions: level.go (the log's apply level: SLUICE.LEVEL, and what a
//     log below a level is applied as, so members of two releases apply
//     alike during a rolling upgrade).
//
//   - Memory: stores.go (whether a command would add a record, for
//     maxmemory).
//
//   - Errors: errors.go (an error as a reply), reason.go (why a command
//     answered an error, typed, for the doors that are not RESP:
//     Outcome.Reason, ReplyError; declared in machine/room), redirect.go
//     (MOVED, TRYAGAIN, CLUSTERDOWN as typed refusals).
//
//   - Encodings and reading: kinds.go (each kind's TYPE name and snapshot
//     encoding), codec.go (reading the records' varint encodings),
//     digest.go (DEBUG DIGEST), debug.go.
//
// docs/design/machine-rooms.md is the plan that moves the other rooms
// (decide, reserve, placement) into packages as the limiters moved.
//
// The connection and server surface (CLIENT, CONFIG, INFO, HELLO, AUTH,
// COMMAND, DEBUG …) lives in package commands and never reaches the
// machine. Each kind's TYPE name and snapshot encoding is declared by its
// room (room.Kind) and gathered in one table, kinds.go.
package machine
