// Package shardsim runs a sharded sluice cluster inside one process: every
// group a hashicorp/raft group on the in-memory transport and stores, every
// member the real state machine (package machine), the real command surface
// (package commands: routing, MOVED, fencing) and the real coordinator of
// checks across groups (package crossgroup), its calls to other members
// delivered in process. Faults are injected where a network would drop
// them: a call lost before it is sent or after it applied, a leader cut
// off from its group. The tests drive 10 and 100 groups with random faults
// and check what must hold whatever happens: a counter lives only in the
// group that owns its slot, nothing is admitted past a limit, and once
// every part has finished each counter holds exactly what was admitted
// (never less).
package shardsim
