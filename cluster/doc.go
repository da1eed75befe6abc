// Package cluster is sluice's replication: a Raft cluster
// (github.com/hashicorp/raft) whose log drives the state machine of package
// machine on every member, and the topology sluice announces to
// cluster-aware clients.
//
//   - Node runs a member: Raft over TCP, the log and stable store in
//     package raftlog (Pebble, synced), snapshots in the data directory.
//   - Batches: the leader gathers the commands connections submit (whole
//     pipelines) into one log entry (entry.go), stamped by its LeaderClock,
//     and keeps many entries in flight; each group's replies come back from
//     the entry's apply, after commit, in order.
//   - Time comes from the log: the fsm applies every entry at its stamp
//     and reads no clock. A new leader serves only after a barrier, and its
//     stamps continue from the last applied stamp plus the monotonic time
//     since it applied (never a wall clock, except a brand-new log's first
//     stamp). An idle leader logs empty entries so time moves everywhere.
//   - Snapshots stream the persist snapshot format from a point-in-time
//     view (machine.Freeze: copy-on-write per slot), so applies go on.
//   - ParsePeers reads --peers; the node id (nodeid.go) names a single node
//     in topology replies, MemberNodeID a replicated member.
package cluster
