package raft

import (
	"bytes"
	"testing"
	"time"
)

// sluice patch (PATCHES.md): a follower advances its commit index no
// further than the last entry an AppendEntries showed to be the leader's.
// A deposed leader keeps an entry of its own past what the new leader
// matched; a request that matches the entry before it, carries no entries
// and names a commit index past it must not commit it — the new leader
// committed a different entry at that index. Unpatched, the follower
// applied its own ("stale") and then the leader's entry overwrote it in the
// log but not in the state machine: two replicas applying different
// entries at one index.
func TestFollowerCommitsOnlyWhatTheLeaderShowed(t *testing.T) {
	c := MakeClusterNoBootstrap(1, t, nil) // no configuration: it never campaigns
	defer c.Close()
	r := c.rafts[0]
	_, sender := NewInmemTransport("")
	sender.Connect(r.localAddr, c.trans[0])
	entry := func(index, term uint64, data string) *Log {
		return &Log{Index: index, Term: term, Type: LogCommand, Data: []byte(data)}
	}
	send := func(req AppendEntriesRequest) {
		t.Helper()
		req.RPCHeader = RPCHeader{ProtocolVersion: ProtocolVersionMax, ID: []byte("leader"), Addr: []byte("leader")}
		var resp AppendEntriesResponse
		if err := sender.AppendEntries(r.localID, r.localAddr, &req, &resp); err != nil || !resp.Success {
			t.Fatalf("AppendEntries %+v: %v %+v", req, err, resp)
		}
	}
	// Term 1: entry 1 committed, entry 2 appended and never committed.
	send(AppendEntriesRequest{Term: 1, Entries: []*Log{entry(1, 1, "a")}, LeaderCommitIndex: 1})
	send(AppendEntriesRequest{Term: 1, PrevLogEntry: 1, PrevLogTerm: 1, Entries: []*Log{entry(2, 1, "stale")}, LeaderCommitIndex: 1})
	// Term 2's leader committed its own entry 2; it probes with what
	// matches and says so.
	send(AppendEntriesRequest{Term: 2, PrevLogEntry: 1, PrevLogTerm: 1, LeaderCommitIndex: 2})
	if got := r.getCommitIndex(); got != 1 {
		t.Fatalf("commit index %d after a request that showed entry 1 only", got)
	}
	// Then it sends its entry 2: the stale one is cleared and this one
	// applied.
	send(AppendEntriesRequest{Term: 2, PrevLogEntry: 1, PrevLogTerm: 1, Entries: []*Log{entry(2, 2, "new")}, LeaderCommitIndex: 2})
	fsm := getMockFSM(c.fsms[0])
	deadline := time.Now().Add(5 * time.Second)
	for len(fsm.Logs()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if logs := fsm.Logs(); len(logs) != 2 || !bytes.Equal(logs[0], []byte("a")) || !bytes.Equal(logs[1], []byte("new")) {
		t.Fatalf("applied %q, want [a new]", logs)
	}
}
