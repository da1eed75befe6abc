package cluster

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Raft keeps what a leader knows of each follower to itself; the topology
// replies (INFO replication, ROLE, CLUSTER NODES) and the metrics need it,
// so the transport the leader replicates through notes, per member, when
// an AppendEntries last succeeded and the highest index it carried. A
// member not heard from within the heartbeat timeout is offline.

// peerHealth is what this node, as leader, last heard from each member.
type peerHealth struct {
	mu    sync.Mutex
	peers map[raft.ServerID]*peerSeen
}

type peerSeen struct {
	last  time.Time
	match uint64
}

func (h *peerHealth) heard(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if resp == nil || !resp.Success {
		return
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.peers == nil {
		h.peers = map[raft.ServerID]*peerSeen{}
	}
	p := h.peers[id]
	if p == nil {
		p = &peerSeen{}
		h.peers[id] = p
	}
	p.last = now
	if n := len(req.Entries); n > 0 {
		p.match = max(p.match, req.Entries[n-1].Index)
	} else if req.PrevLogEntry > 0 {
		p.match = max(p.match, req.PrevLogEntry)
	}
}

func (h *peerHealth) seen(id raft.ServerID) (last time.Time, match uint64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.peers[id]
	if p == nil {
		return time.Time{}, 0, false
	}
	return p.last, p.match, true
}

// trackingTransport is the TCP transport, noting successful appends.
type trackingTransport struct {
	*raft.NetworkTransport
	health *peerHealth
}

func (t *trackingTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, target, req, resp)
	if err == nil {
		t.health.heard(id, req, resp)
	}
	return err
}

func (t *trackingTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	inner, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	p := &trackingPipeline{AppendPipeline: inner, out: make(chan raft.AppendFuture, 128), stop: make(chan struct{})}
	go p.relay(id, t.health)
	return p, nil
}

// trackingPipeline relays the inner pipeline's finished appends to Raft,
// noting the successful ones.
type trackingPipeline struct {
	raft.AppendPipeline
	out  chan raft.AppendFuture
	stop chan struct{}
	once sync.Once
}

func (p *trackingPipeline) relay(id raft.ServerID, h *peerHealth) {
	in := p.AppendPipeline.Consumer()
	for {
		select {
		case f := <-in:
			if f.Error() == nil {
				h.heard(id, f.Request(), f.Response())
			}
			select {
			case p.out <- f:
			case <-p.stop:
				return
			}
		case <-p.stop:
			return
		}
	}
}

func (p *trackingPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

func (p *trackingPipeline) Close() error {
	p.once.Do(func() { close(p.stop) })
	return p.AppendPipeline.Close()
}

// PeerState is one member as this node sees it.
type PeerState struct {
	Member
	// Known: this node knows the member's state — it leads, or the member
	// is itself or the leader, or the leader's last note (peernote.go)
	// is fresh. A member not known is neither online nor failed.
	Known bool
	// Online: the leader heard from it within the heartbeat timeout (the
	// leader itself is always online).
	Online bool
	// LastContact is how long ago it was last heard from (-1: never, or
	// not known here); MatchIndex the highest log index it is known to
	// hold (the leader's: its last index, on a follower as the leader's
	// last note says; 0: not known).
	LastContact time.Duration
	MatchIndex  uint64
}

// Health is the member's state in one word: online, offline, or unknown
// (neither: this node has no fresh word on it).
func (p PeerState) Health() string {
	switch {
	case !p.Known:
		return "unknown"
	case !p.Online:
		return "offline"
	}
	return "online"
}

// Peers describes every member: on the leader, what it last heard from
// each; on a follower, itself, the leader it last heard from, and its
// siblings as the leader's last note says.
func (n *Node) Peers() ([]PeerState, error) {
	members, err := n.Members()
	if err != nil {
		return nil, err
	}
	leading := n.raft.State() == raft.Leader
	out := make([]PeerState, len(members))
	for i, m := range members {
		p := PeerState{Member: m, LastContact: -1, Known: true}
		switch {
		case m.Self:
			p.Online, p.LastContact, p.MatchIndex = true, 0, n.raft.LastIndex()
		case leading:
			if last, match, ok := n.health.seen(raft.ServerID(m.ID)); ok {
				p.LastContact, p.MatchIndex = time.Since(last), match
				p.Online = p.LastContact < n.cfg.HeartbeatTimeout
			}
		case m.Leader:
			if lc := n.raft.LastContact(); !lc.IsZero() {
				p.LastContact = time.Since(lc)
				p.Online = p.LastContact < n.cfg.HeartbeatTimeout
			}
			// The leader's own last index, as its last note says (0 with
			// no fresh note).
			if s, _, ok := n.notes.lookup(m.ID, n.raft.CurrentTerm(), n.noteMaxAge()); ok {
				p.MatchIndex = s.match
			}
		default:
			p = n.siblingState(m)
		}
		out[i] = p
	}
	return out, nil
}

// HeartbeatTimeout is how long a member may go unheard before it counts
// as offline (and a follower stands for election).
func (n *Node) HeartbeatTimeout() time.Duration { return n.cfg.HeartbeatTimeout }
