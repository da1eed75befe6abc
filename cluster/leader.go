package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// watchLeadership follows this node's leadership. On winning an election
// it serves only after a barrier (every entry of earlier terms applied
// here), with a stamp clock continuing the log's time from the last
// applied stamp; on losing it, it stops at once.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	for {
		var leader bool
		select {
		case <-n.stop:
			return
		case leader = <-n.raft.LeaderCh():
		}
		n.leaderChanges.Add(1)
		n.serving.Store(false)
		n.clock.Store(nil)
		if !leader {
			n.log.Info("not the leader", "node", n.cfg.NodeID)
			continue
		}
		if err := n.raft.Barrier(n.cfg.ApplyTimeout).Error(); err != nil {
			n.log.Warn("elected, but the barrier failed; not serving", "node", n.cfg.NodeID, "err", err)
			continue
		}
		if n.raft.State() != raft.Leader {
			continue
		}
		last, fresh := n.fsm.stampBase()
		base, jumped := TakeoverBase(last, fresh, n.cfg.Wall(), int64(n.cfg.ClockCatchUp))
		if jumped > 0 {
			n.log.Info("leader: the log's time caught up with the wall clock", "node", n.cfg.NodeID,
				"forward", time.Duration(jumped), "behind_still", time.Duration(max(n.cfg.Wall()-base, 0)))
		}
		n.clock.Store(NewLeaderClock(base, n.cfg.Mono))
		n.serving.Store(true)
		n.log.Info("leader: serving", "node", n.cfg.NodeID, "term", n.raft.CurrentTerm(), "stamp", base)
	}
}

// Serving reports whether this node is the leader and takes commands.
func (n *Node) Serving() bool { return n.serving.Load() }

// LiveLeader reports whether this node can have a decision made now: it
// leads and serves, or it follows a leader it heard from within the
// heartbeat timeout (the failure detector Raft itself uses). A leader that
// died is still "known" until an election replaces it; it is not live.
func (n *Node) LiveLeader() bool {
	if n.serving.Load() {
		return true
	}
	id, _, ok := n.Leader()
	if !ok || id == n.cfg.NodeID {
		return false
	}
	return time.Since(n.raft.LastContact()) < n.cfg.HeartbeatTimeout
}

// readyLag is how many entries a ready member may have committed but not
// yet applied: entries in flight, not a log being replayed.
const readyLag = 64

// Ready reports whether this node can serve decisions now: it follows or
// is a live leader (LiveLeader) and has applied what it knows committed,
// within the entries in flight (a restarted node replaying its log is not
// ready).
func (n *Node) Ready() bool {
	return n.LiveLeader() && n.raft.AppliedIndex()+readyLag >= n.raft.CommitIndex()
}

// Leader is the current leader's id and Redis-protocol address, as this
// node knows it.
func (n *Node) Leader() (id, clientAddr string, ok bool) {
	addr, sid := n.raft.LeaderWithID()
	if sid == "" {
		return "", "", false
	}
	return string(sid), n.clientAddr(string(sid), string(addr)), true
}

// clientAddr is member id's Redis-protocol address: from the peer list, or
// for a member added later, from what it was added with, or else the Redis
// convention (its Raft port less 10000, as the cluster bus).
func (n *Node) clientAddr(id, raftAddr string) string {
	n.mu.Lock()
	a, ok := n.clientAddrs[id]
	n.mu.Unlock()
	if ok {
		return a
	}
	return busToClient(raftAddr)
}

// Self is this node's id.
func (n *Node) Self() string { return n.cfg.NodeID }

// Member is one server of the Raft configuration as this node sees it.
type Member struct {
	ID, ClientAddr, RaftAddr string
	Voter, Leader, Self      bool
}

// Members lists the configuration's servers.
func (n *Node) Members() ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	leaderID, _, _ := n.Leader()
	var out []Member
	for _, s := range f.Configuration().Servers {
		id := string(s.ID)
		out = append(out, Member{ID: id, RaftAddr: string(s.Address), ClientAddr: n.clientAddr(id, string(s.Address)),
			Voter: s.Suffrage == raft.Voter, Leader: id == leaderID, Self: id == n.cfg.NodeID})
	}
	return out, nil
}

// Status is what RAFT INFO reports.
type Status struct {
	State                                    string
	Term, LastIndex, CommitIndex, AppliedIdx uint64
	LeaderChanges                            int64
	Applied                                  int64
}

// Status reads Raft's counters.
func (n *Node) Status() Status {
	return Status{State: n.raft.State().String(), Term: n.raft.CurrentTerm(), LastIndex: n.raft.LastIndex(),
		CommitIndex: n.raft.CommitIndex(), AppliedIdx: n.raft.AppliedIndex(), LeaderChanges: n.leaderChanges.Load(),
		Applied: n.fsm.m.Applied()}
}

// AddVoter adds a member (the leader only).
func (n *Node) AddVoter(id, clientAddr, raftAddr string) error {
	n.mu.Lock()
	n.clientAddrs[id] = clientAddr
	n.raftAddrs[id] = raftAddr
	n.mu.Unlock()
	return n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout).Error()
}

// RemoveMember removes a member (the leader only).
func (n *Node) RemoveMember(id string) error {
	return n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error()
}

// TransferLeadership hands leadership to id, or to the most up-to-date
// follower when id is empty (the leader only).
func (n *Node) TransferLeadership(id string) error {
	if id == "" {
		return n.raft.LeadershipTransfer().Error()
	}
	ms, err := n.Members()
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.ID == id {
			return n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(m.RaftAddr)).Error()
		}
	}
	return fmt.Errorf("%w: no member %q", ErrConfig, id)
}

// Snapshot takes a Raft snapshot now.
func (n *Node) Snapshot() error {
	err := n.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return err
}

// WaitServing blocks until this node serves or d passes (tests, startup).
func (n *Node) WaitServing(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !n.serving.Load() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
