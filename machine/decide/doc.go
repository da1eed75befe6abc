// Package decide is the machine's decisions over rules: the rule set,
// overrides and scales, checking several limits at one instant, and the
// decisions that hold what they charged.
//
// It is a room of package machine (see machine/doc.go): it never imports
// the machine, sees an apply through Exec (which the core's apply
// implements) and its machine through Core, and declares its commands
// and kinds of record in package machine/room's types. Everything here
// runs inside a deterministic apply: no clock, no disk, no map order.
//
// # Where things are
//
//   - room.go: the contract with the core (Exec, Core, Room, Scratch),
//     the kinds of record, and what a restore or a flush reloads.
//   - Rules and policy: policy.go (RL.CHECK), policy_state.go (the
//     rules', overrides' and scales' records), policy_admin.go (RL.RULES,
//     RL.OVERRIDE, RL.SCALE), migrate.go (records under an older key,
//     moved on restore).
//   - The decision core: decide.go (plan, decide, commit: several limits
//     at one instant), multicheck.go (each limit's evaluation and the
//     commit of all or none), undo.go (a partial charge put back),
//     result.go (the typed results the doors format), checkall.go
//     (RL.CHECKALL), rls.go (RL.SHOULDRATELIMIT, Envoy's request).
//   - Decisions that hold: reserve.go (RL.RESERVE and the holder that
//     keeps a head and, in a sharded group, a part per counter's slot),
//     settle.go (RL.SETTLE, RL.CANCEL, never-lax refunds), reservation.go
//     (the records), reservations.go (counts), lease.go and
//     lease_demand.go (RL.LEASE: shares of a limit by demand).
//   - Across groups: part.go (RL.PART, a group's part of a check, and
//     Split, how a check is cut by group), partrequest.go (a part typed
//     as members send it, and the refusals members act on),
//     config_copy.go (SLUICE.CONFIG).
//
// Reservations, leases and parts stay in this package rather than one of
// their own: each is a decision that holds, built on the plan's working
// memory (docs/design/machine-rooms.md).
package decide
