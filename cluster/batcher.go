package cluster

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluice-rl/sluice/machine"
)

// Pending is a group of commands (one connection's pipeline) on its way
// through the log. Wait for it, then read each command's reply.
type Pending struct {
	cmds [][][]byte
	done chan struct{}
	res  *applied
	// first is the index of this group's first command in its entry.
	first int
	err   error
}

// Wait blocks until the group's entry has applied here (or failed).
func (p *Pending) Wait() error {
	<-p.done
	return p.err
}

// Reply is command i's reply (RESP2) and its outcome (whether a limiter
// refused it, and its typed result); valid after Wait returned nil.
func (p *Pending) Reply(i int) ([]byte, machine.Outcome) {
	j := p.first + i
	start := 0
	if j > 0 {
		start = p.res.ends[j-1]
	}
	return p.res.replies[start:p.res.ends[j]], p.res.outs[j]
}

// Submit queues cmds to be logged as part of the next entry. The argument
// slices are read until the entry is encoded, which happens before Wait
// returns: the caller keeps them unchanged until then.
func (n *Node) Submit(cmds [][][]byte) *Pending {
	p := &Pending{cmds: cmds, done: make(chan struct{})}
	select {
	case n.batches <- p:
	case <-n.stop:
		p.fail(raft.ErrRaftShutdown)
	}
	return p
}

func (p *Pending) fail(err error) {
	p.err = err
	close(p.done)
}

// inflight is an entry sent to Raft; its groups wait in n.props under
// its proposal.
type inflight struct {
	fut  raft.ApplyFuture
	prop Proposal
	sent time.Time
}

// runBatches turns whatever groups are queued into one log entry at a
// time, stamped with the leader's clock, and hands each to Raft without
// waiting for the previous to commit: many entries are in flight at once,
// and Raft writes those queued together in one disk write.
func (n *Node) runBatches() {
	defer n.wg.Done()
	inflights := make(chan inflight, 1024)
	// window bounds the entries in flight: while it is full, groups queue
	// up and go out together in the next entry (group commit), so entries
	// grow with the load instead of carrying one command each.
	window := make(chan struct{}, n.cfg.MaxInflight)
	n.wg.Add(1)
	go n.runReplies(inflights, window)
	defer close(inflights)
	var cmds [][][]byte
	for {
		var p *Pending
		select {
		case <-n.stop:
			return
		case p = <-n.batches:
		}
		select {
		case window <- struct{}{}:
		case <-n.stop:
			p.fail(raft.ErrRaftShutdown)
			return
		}
		groups := []*Pending{p}
		count := len(p.cmds)
	gather:
		for count < n.cfg.MaxBatchCommands {
			select {
			case q := <-n.batches:
				groups = append(groups, q)
				count += len(q.cmds)
			default:
				break gather
			}
		}
		clk := n.clock.Load()
		if !n.serving.Load() || clk == nil {
			<-window
			err := n.notLeader()
			for _, g := range groups {
				g.fail(err)
			}
			continue
		}
		cmds = cmds[:0]
		for _, g := range groups {
			g.first = len(cmds)
			cmds = append(cmds, g.cmds...)
		}
		prop := n.props.add(groups)
		entry := AppendProposal(nil, prop, clk.Stamp(), cmds)
		n.batchSizes.observe(len(cmds))
		n.lastEntry.Store(n.cfg.Mono())
		fut := n.raft.ApplyLog(raft.Log{Data: entry, Extensions: n.noteIfDue()}, n.cfg.ApplyTimeout)
		inflights <- inflight{fut: fut, prop: prop, sent: time.Now()}
	}
}

// runReplies waits for the entries in the order they were sent, to keep
// the window of entries in flight. The groups' replies are handed out by
// the state machine as it applies each entry (fsm.Apply), on this node
// whether it still leads or not; here only an entry that may not apply is
// settled: refused before it was logged (nothing happened), or logged and
// then left uncommitted by a lost leadership (awaitOutcome).
func (n *Node) runReplies(inflights <-chan inflight, window <-chan struct{}) {
	defer n.wg.Done()
	for e := range inflights {
		err := e.fut.Error()
		n.commitLatency.observe(time.Since(e.sent))
		<-window
		switch {
		case err == nil:
			// Applied, so handed out; a proposal still waiting would be a
			// bug in that hand-off: it must not wait forever.
			n.settle(e.prop, fmt.Errorf("%w: entry applied without its replies", ErrUnknownOutcome))
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout):
			// Refused before it was logged: nothing happened.
			n.settle(e.prop, n.notLeader())
		case errors.Is(err, raft.ErrLeadershipTransferInProgress):
			n.settle(e.prop, ErrTransferring)
		case errors.Is(err, raft.ErrRaftShutdown):
			n.settle(e.prop, fmt.Errorf("%w: %w", ErrUnknownOutcome, err))
		default:
			// Logged here, perhaps committed by the next leader: its apply
			// will tell, or another entry taking its index will.
			n.wg.Add(1)
			go n.awaitOutcome(e.prop, e.fut.Index(), err)
		}
	}
}

// settle fails the groups of prop with err unless the state machine has
// handed them their replies.
func (n *Node) settle(prop Proposal, err error) {
	for _, g := range n.props.take(prop) {
		g.fail(err)
	}
}

// awaitOutcome settles an entry this node logged at index whose leadership
// was lost (cause) before it committed: it applies here later, handing
// out its replies (committed by the next leader), or another entry takes
// its index and it never applies (ErrNotApplied: a retry is safe). Past
// the apply timeout, or if a snapshot restore skips over it, the outcome
// is unknown.
func (n *Node) awaitOutcome(prop Proposal, index uint64, cause error) {
	defer n.wg.Done()
	restores := n.fsm.restores.Load()
	deadline := time.NewTimer(n.cfg.ApplyTimeout)
	defer deadline.Stop()
	for {
		next, done := n.props.watch()
		if !n.props.waits(prop.Seq) {
			done()
			return // applied: replies handed out
		}
		switch {
		case n.fsm.restores.Load() != restores:
			done()
			n.settle(prop, fmt.Errorf("%w: %w", ErrUnknownOutcome, cause))
			return
		case index == 0 || n.fsm.lastIndex.Load() >= index:
			// Its index applied without it (the state machine takes a
			// proposal before it records the index).
			done()
			n.settle(prop, ErrNotApplied)
			return
		}
		select {
		case <-next:
			done()
		case <-deadline.C:
			done()
			n.settle(prop, fmt.Errorf("%w: %w", ErrUnknownOutcome, cause))
			return
		case <-n.stop:
			done()
			n.settle(prop, fmt.Errorf("%w: %w", ErrUnknownOutcome, raft.ErrRaftShutdown))
			return
		}
	}
}

// notLeader is the error for a group this node cannot log: not the
// leader (who is, if known), or no leader at all.
func (n *Node) notLeader() error {
	if _, _, ok := n.Leader(); ok {
		return ErrNotLeader
	}
	return ErrNoLeader
}

// tick logs an empty entry when the leader has logged nothing for a tick
// interval, so the log's time moves on every replica even when idle, and
// keys expire (and are swept) in bounded time.
func (n *Node) tick() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if !n.serving.Load() || n.cfg.Mono()-n.lastEntry.Load() < int64(n.cfg.TickInterval) {
			continue
		}
		n.Submit(nil)
	}
}

// latencyHistogram counts durations in power-of-two microsecond buckets
// (bucket 0: at most 1 µs; bucket i: (2^(i-1), 2^i] µs).
type latencyHistogram struct {
	buckets [32]atomic.Int64
	nanos   atomic.Int64
}

func (h *latencyHistogram) observe(d time.Duration) {
	us := (int64(d) + 999) / 1000
	b := 0
	if us > 1 {
		b = min(bits.Len64(uint64(us-1)), len(h.buckets)-1)
	}
	h.buckets[b].Add(1)
	h.nanos.Add(int64(d))
}

// CommitLatency is how long this node's entries took from being handed to
// Raft to being applied (committed by a majority), as counts per power-of-
// two microsecond bucket, and their total in nanoseconds.
func (n *Node) CommitLatency() (buckets []int64, totalNanos int64) {
	buckets = make([]int64, len(n.commitLatency.buckets))
	for i := range buckets {
		buckets[i] = n.commitLatency.buckets[i].Load()
	}
	return buckets, n.commitLatency.nanos.Load()
}

// batchHistogram counts entries by their number of commands, in powers of
// two, for the batch-size distribution.
type batchHistogram struct{ buckets [16]atomic.Int64 }

func (h *batchHistogram) observe(n int) {
	b := 0
	for n > 1 && b < len(h.buckets)-1 {
		n >>= 1
		b++
	}
	h.buckets[b].Add(1)
}

// BatchSizes is how many entries held 1, 2–3, 4–7, … commands (bucket i
// counts sizes in [2^i, 2^(i+1))).
func (n *Node) BatchSizes() []int64 {
	out := make([]int64, len(n.batchSizes.buckets))
	for i := range out {
		out[i] = n.batchSizes.buckets[i].Load()
	}
	return out
}

// SnapshotSkippedKeys counts the keys this node's snapshots left out
// because their states could not be encoded.
func (n *Node) SnapshotSkippedKeys() int64 { return n.fsm.skipped.Load() }
