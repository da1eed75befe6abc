// Package raftlog is the durable storage hashicorp/raft needs on each node:
// a raft.LogStore (the replicated log) and a raft.StableStore (the current
// term and vote) in one Pebble database.
//
// Every write (StoreLog, StoreLogs, DeleteRange, Set, SetUint64) is synced
// to disk before it returns: Raft counts a log entry towards a commit, and a
// vote towards an election, as soon as the call returns, so an entry or a
// vote that a crash could lose would let two leaders exist in one term.
// Both stores share the database, so one sync covers a batch of entries.
package raftlog
