// Package room is the contract between the state machine's core (package
// machine: the apply rule, the command table, snapshots) and its rooms,
// the packages that each keep one concern of the replicated state (package
// limiters: CL.THROTTLE, SW/FW, CONC, QUOTA; more to come, see
// docs/design/machine-rooms.md). A room never imports the core: it
// declares its commands and its kinds of record in this package's types,
// and sees an apply through an interface of its own that the core's apply
// implements. The core imports the rooms and registers what they declare.
package room
