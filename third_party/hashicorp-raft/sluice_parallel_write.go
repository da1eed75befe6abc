// Copyright IBM Corp. 2013, 2025
// SPDX-License-Identifier: MPL-2.0

package raft

// sluice patch 2 (PATCHES.md): a leader's write beside its replication
// (Config.LeaderParallelWrite).

// writingLogs are consecutive entries a leader of term is writing to its
// LogStore.
type writingLogs struct {
	term  uint64
	first uint64
	logs  []*Log
}

// dispatchLogsWhileWriting is dispatchLogs' write when
// Config.LeaderParallelWrite is set: the replicators are told of the new
// entries (and read them from leaderWriting) before the leader's own
// write starts, and the leader counts itself toward their commit only once
// that write has returned. Until then an entry commits only on followers'
// writes, so whatever commits is on the disks of a majority, as without
// the option. The leader loop is inside this call while the write runs, so
// the leader applies no entry, its own included, before its write returns.
func (r *Raft) dispatchLogsWhileWriting(applyLogs []*logFuture, logs []*Log, lastIndex, term uint64) {
	prevIndex, prevTerm := r.getLastLog()
	r.leaderWriting.Store(&writingLogs{term: term, first: logs[0].Index, logs: logs})
	r.setLastLog(lastIndex, term)
	for _, f := range r.leaderState.replState {
		asyncNotifyCh(f.triggerCh)
	}
	if err := r.logs.StoreLogs(logs); err != nil {
		r.logger.Error("failed to commit logs", "error", err)
		// Followers may have them, and may commit them under the next
		// leader: the futures' error is the store's, which says nothing of
		// whether they apply. This node's log ends where it did. The
		// entries stay in leaderWriting: a replicator that read the last
		// index before it was put back still finds them (sending what
		// followers may hold already) rather than missing an entry and
		// sending a snapshot instead; they are served only in this term,
		// in which this node leads no more.
		r.setLastLog(prevIndex, prevTerm)
		for _, applyLog := range applyLogs {
			applyLog.respond(err)
		}
		r.setState(Follower)
		return
	}
	// The store holds them now: every index up to lastIndex is readable
	// from one of the two whenever a replicator looks.
	r.leaderWriting.Store(nil)
	r.leaderState.commitment.match(r.localID, lastIndex)
}

// getLogToSend reads the entry at index for a follower: from the write in
// flight (in this term) if it holds it, else from the LogStore.
func (r *Raft) getLogToSend(index uint64, log *Log) error {
	if w := r.leaderWriting.Load(); w != nil && w.term == r.getCurrentTerm() && index >= w.first && index-w.first < uint64(len(w.logs)) {
		*log = *w.logs[index-w.first]
		return nil
	}
	return r.logs.GetLog(index, log)
}
