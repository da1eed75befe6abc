package cluster

import (
	"encoding/binary"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A follower does not replicate to its siblings, so it cannot know their
// state; only the leader does. The leader therefore carries what it knows
// of every member on the log: at most every peerNoteInterval it attaches a
// peer note to the next entry it appends, in the entry's Extensions — the
// field hashicorp/raft keeps beside the command for layers like this one,
// which the state machine never reads (a note changes no state and no
// reply). A follower applying an entry of the current term with a note
// keeps it, and reports its siblings as the note says, aged by the time
// since it arrived. With no fresh note (just started, or the leader gone
// quiet) a follower says a sibling's state is unknown — never that it
// failed.
//
// A note's encoding:
//
//	magic     1 byte, peerNoteMagic
//	count     uvarint
//	per member: uvarint id length | id | 1 byte online (0 or 1) |
//	            uvarint last contact in ms + 1 (0: never heard) | uvarint match index

const peerNoteMagic = 0x70

// peerNoteInterval is how often the leader attaches a note to its entries
// (an idle leader's tick entry carries one at least every TickInterval).
const peerNoteInterval = 250 * time.Millisecond

// errPeerNote: bytes that are not a peer note; the note is ignored.
var errPeerNote = errors.New("cluster: malformed peer note")

// peerNoted is one member as a note describes it.
type peerNoted struct {
	online  bool
	contact time.Duration // -1: never heard
	match   uint64
}

// appendPeerNote encodes the leader's view of peers.
func appendPeerNote(dst []byte, peers []PeerState) []byte {
	dst = append(dst, peerNoteMagic)
	dst = binary.AppendUvarint(dst, uint64(len(peers)))
	for _, p := range peers {
		dst = binary.AppendUvarint(dst, uint64(len(p.ID)))
		dst = append(dst, p.ID...)
		online := byte(0)
		if p.Online {
			online = 1
		}
		dst = append(dst, online)
		contact := uint64(0)
		if p.LastContact >= 0 {
			contact = uint64(p.LastContact.Milliseconds()) + 1
		}
		dst = binary.AppendUvarint(dst, contact)
		dst = binary.AppendUvarint(dst, p.MatchIndex)
	}
	return dst
}

// parsePeerNote decodes a note; any malformed input is an error.
func parsePeerNote(b []byte) (map[string]peerNoted, error) {
	if len(b) == 0 || b[0] != peerNoteMagic {
		return nil, errPeerNote
	}
	b = b[1:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	count, ok := next()
	if !ok || count > uint64(len(b)) {
		return nil, errPeerNote
	}
	out := make(map[string]peerNoted, count)
	for range count {
		l, ok := next()
		if !ok || l > uint64(len(b)) {
			return nil, errPeerNote
		}
		id := string(b[:l])
		b = b[l:]
		if len(b) == 0 || b[0] > 1 {
			return nil, errPeerNote
		}
		p := peerNoted{online: b[0] == 1}
		b = b[1:]
		contact, ok := next()
		if !ok || contact > uint64(time.Duration(1<<62).Milliseconds()) {
			return nil, errPeerNote
		}
		p.contact = -1
		if contact > 0 {
			p.contact = time.Duration(contact-1) * time.Millisecond
		}
		if p.match, ok = next(); !ok {
			return nil, errPeerNote
		}
		out[id] = p
	}
	if len(b) != 0 {
		return nil, errPeerNote
	}
	return out, nil
}

// peerNotes is the last note a follower applied, and when.
type peerNotes struct {
	mu sync.Mutex
	// liveFrom: entries up to this index were in the log when the node
	// started; their notes are history, not news, and are ignored.
	liveFrom uint64
	term     uint64
	at       time.Time
	peers    map[string]peerNoted
	// sent is when this node, leading, last attached a note (monotonic ns).
	sent int64
}

// keep records the note an entry of term carried, applied now.
func (p *peerNotes) keep(index, term uint64, note []byte) {
	peers, err := parsePeerNote(note)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if index <= p.liveFrom || term < p.term {
		return
	}
	p.term, p.at, p.peers = term, time.Now(), peers
}

// lookup is what the freshest note says of member id: ok is false when no
// note of term arrived within maxAge, or it does not name id.
func (p *peerNotes) lookup(id string, term uint64, maxAge time.Duration) (peerNoted, time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	age := time.Since(p.at)
	if p.peers == nil || p.term != term || age > maxAge {
		return peerNoted{}, 0, false
	}
	s, ok := p.peers[id]
	return s, age, ok
}

// noteIfDue is the note to attach to the entry about to be appended: the
// leader's view of every member, at most every peerNoteInterval; nil when
// one went out recently.
func (n *Node) noteIfDue() []byte {
	now := n.cfg.Mono()
	n.notes.mu.Lock()
	due := n.notes.sent == 0 || now-n.notes.sent >= int64(peerNoteInterval)
	if due {
		n.notes.sent = now
	}
	n.notes.mu.Unlock()
	if !due {
		return nil
	}
	peers, err := n.Peers()
	if err != nil {
		return nil
	}
	sort.Slice(peers, func(i, j int) bool { return peers[i].ID < peers[j].ID })
	return appendPeerNote(nil, peers)
}

// noteMaxAge is how old the last note may be for a follower to trust it:
// three ticks, so one lost or slow entry does not turn siblings unknown.
func (n *Node) noteMaxAge() time.Duration { return 3 * max(n.cfg.TickInterval, peerNoteInterval) }

// siblingState is member m (neither this node nor the leader) as the
// leader's last note describes it.
func (n *Node) siblingState(m Member) PeerState {
	s, age, ok := n.notes.lookup(m.ID, n.raft.CurrentTerm(), n.noteMaxAge())
	return notedState(m, s, age, ok, n.notedOnlineWithin())
}

// notedOnlineWithin is how long ago a sibling, as the leader's last note
// tells it, may have been heard from and still count as online: the
// leader's own bound (the heartbeat timeout) and one interval between notes
// (an idle leader notes on its tick entries), so a healthy sibling does not
// flicker offline between notes, and one last heard seconds ago is not
// online.
func (n *Node) notedOnlineWithin() time.Duration {
	return n.cfg.HeartbeatTimeout + max(n.cfg.TickInterval, peerNoteInterval)
}

// notedState is member m as a note age old describes it (ok: the note
// names it): its last contact has aged with the note, and it is online
// only if the note said so and that contact is within onlineWithin.
func notedState(m Member, s peerNoted, age time.Duration, ok bool, onlineWithin time.Duration) PeerState {
	p := PeerState{Member: m, LastContact: -1}
	if !ok {
		return p
	}
	p.Known, p.Online, p.MatchIndex = true, s.online, s.match
	if s.contact >= 0 {
		p.LastContact = s.contact + age
		p.Online = p.Online && p.LastContact < onlineWithin
	}
	return p
}

// applyExtensions passes a committed entry's note to the node (the state
// machine ignores it). It runs on Raft's apply goroutine, perhaps before
// NewRaft has returned: it touches only the notes. A leader keeps its own
// notes too, unread while it leads.
func (n *Node) applyExtensions(l *raft.Log) {
	if len(l.Extensions) > 0 {
		n.notes.keep(l.Index, l.Term, l.Extensions)
	}
}
