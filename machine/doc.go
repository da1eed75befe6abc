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
// The connection and server surface (CLIENT, CONFIG, INFO, HELLO, AUTH,
// COMMAND, DEBUG …) lives in package commands and never reaches the
// machine. Kinds, their TYPE names and their snapshot encodings are paired
// in one place, kinds.go.
package machine
