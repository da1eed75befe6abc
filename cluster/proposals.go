package cluster

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
)

// proposals are the entries this node logged whose clients wait for them,
// by sequence number. Whoever takes a proposal out — the state machine
// applying its entry, or the batcher learning it cannot apply — completes
// its groups, exactly once.
type proposals struct {
	// id is this process's proposer id: random, never 0, so an entry a
	// node proposed before a restart is never mistaken for one of its own.
	id uint64

	mu      sync.Mutex
	seq     uint64
	waiting map[uint64][]*Pending
	// applied is signalled (closed and replaced) after an apply or a
	// restore while anyone watches (an outcome is awaited), so watchers
	// look again.
	applied  chan struct{}
	watchers int
}

func newProposals() *proposals {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return &proposals{id: id, waiting: map[uint64][]*Pending{}, applied: make(chan struct{})}
		}
	}
}

// add registers groups for the next entry and returns its proposal.
func (p *proposals) add(groups []*Pending) Proposal {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	p.waiting[p.seq] = groups
	return Proposal{Proposer: p.id, Seq: p.seq}
}

// take removes and returns the groups of proposal pr if it is this node's
// and still waits (nil otherwise).
func (p *proposals) take(pr Proposal) []*Pending {
	if pr.Proposer != p.id {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.waiting[pr.Seq]
	if ok {
		delete(p.waiting, pr.Seq)
	}
	return g
}

// waits reports whether proposal seq still waits.
func (p *proposals) waits(seq uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.waiting[seq]
	return ok
}

// signal wakes the watchers after an apply or a restore.
func (p *proposals) signal() {
	p.mu.Lock()
	if p.watchers > 0 {
		close(p.applied)
		p.applied = make(chan struct{})
	}
	p.mu.Unlock()
}

// watch returns the channel the next signal closes; call done when no
// longer watching.
func (p *proposals) watch() (next <-chan struct{}, done func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watchers++
	return p.applied, func() {
		p.mu.Lock()
		p.watchers--
		p.mu.Unlock()
	}
}

// failAll completes every waiting proposal with err (the node stops).
func (p *proposals) failAll(err error) {
	p.mu.Lock()
	all := p.waiting
	p.waiting = map[uint64][]*Pending{}
	p.mu.Unlock()
	for _, groups := range all {
		for _, g := range groups {
			g.fail(err)
		}
	}
}
