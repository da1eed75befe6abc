package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/persist"
	"github.com/sluice-rl/sluice/resp"
)

// fsm is the state machine as Raft drives it: every committed entry is a
// batch of commands stamped with the leader's instant, applied in order to
// the machine at that instant. It reads no clock: the stamp is the time.
type fsm struct {
	m   *machine.Machine
	dec BatchDecoder
	// mono is the local monotonic clock, read only to note when the last
	// entry applied here, so a node that becomes leader can continue the
	// log's time from it (see stampBase). It never decides a reply.
	mono func() int64
	// props are the entries this node proposed whose clients wait: an
	// entry of one of them is applied keeping its replies, which go to
	// those clients; any other entry's replies are thrown away as they are
	// built (nil: keep every entry's, and hand none out — tests).
	props *proposals
	// lastIndex is the index of the last entry applied here.
	lastIndex atomic.Uint64
	// restores counts snapshot restores: entries they covered applied
	// without passing through Apply here.
	restores atomic.Int64
	// discard is the reply buffer of entries no client here waits for,
	// reused entry after entry.
	discard resp.Writer
	// scratch is every apply's working state: Raft applies one entry at a
	// time, so one serves them all, and an apply allocates none.
	scratch machine.Scratch
	// log receives what snapshots left out; nil discards.
	log *slog.Logger
	// extensions, when set, is handed every entry that carries Extensions
	// (the leader's peer notes); what it does never reaches the machine.
	extensions func(*raft.Log)
	// skipped counts keys snapshots left out (persist.SaveInfo.Skipped).
	skipped atomic.Int64
	// trace, when set, is told every command applied (the robustness
	// suite's apply trace; nil otherwise).
	trace *applyTrace

	mu sync.Mutex
	// lastStamp is the stamp of the last entry applied; lastMono the local
	// monotonic instant it was applied at.
	lastStamp, lastMono int64
}

// applied is an entry's result: the replies of its commands back to back,
// in order, where each ends, and each command's outcome (typed results
// copied out of the scratch they were made in). The node that proposed the
// entry hands them to the waiting connections.
type applied struct {
	replies []byte
	ends    []int
	outs    []machine.Outcome
}

// replyBytesPerCommand is the room an entry's replies start with, per
// command: a limiter's reply (CL.THROTTLE's five integers) fits.
const replyBytesPerCommand = 48

// Apply applies one committed entry. A corrupt entry is rejected before
// anything changes, the clock included: every replica decodes the same
// bytes the same way, so it fails alike everywhere. An entry this node
// proposed hands its replies to the clients waiting for it, whichever node
// leads now.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if f.extensions != nil && len(l.Extensions) > 0 {
		f.extensions(l)
	}
	b, err := f.dec.Check(l.Data)
	if err != nil {
		f.applied(l.Index)
		return fmt.Errorf("cluster: entry %d: %w", l.Index, err)
	}
	stamp := b.Stamp
	f.m.Advance(stamp)
	var groups []*Pending
	if f.props != nil {
		groups = f.props.take(b.Proposal)
	}
	if f.props != nil && groups == nil {
		// Nobody here waits: the same applies, no replies kept.
		f.dec.Walk(b, func(args [][]byte) {
			f.discard.Buf = f.discard.Buf[:0]
			f.m.ApplyArgsScratch(&f.scratch, stamp, args, &f.discard)
			if f.trace != nil {
				f.trace.command(l.Index, stamp, b.Proposal, args, f.discard.Buf)
			}
		})
		if f.trace != nil {
			f.trace.flush()
		}
		f.noteApplied(stamp)
		f.applied(l.Index)
		return nil
	}
	// Sized once from the entry's command count: growing them command by
	// command was a sixth of a busy leader's CPU.
	n := b.Len()
	res := &applied{ends: make([]int, 0, n), outs: make([]machine.Outcome, 0, n)}
	w := resp.Writer{Proto: 2, Buf: make([]byte, 0, replyBytesPerCommand*n)}
	f.dec.Walk(b, func(args [][]byte) {
		start := len(w.Buf)
		out := f.m.ApplyArgsScratch(&f.scratch, stamp, args, &w)
		res.ends = append(res.ends, len(w.Buf))
		res.outs = append(res.outs, out)
		if f.trace != nil {
			f.trace.command(l.Index, stamp, b.Proposal, args, w.Buf[start:])
		}
	})
	if f.trace != nil {
		f.trace.flush()
	}
	res.replies = w.Buf
	f.noteApplied(stamp)
	for _, g := range groups {
		g.res = res
		close(g.done)
	}
	f.applied(l.Index)
	return res
}

// applied records that the entry at index went through Apply (after its
// proposal, if any, was taken) and wakes whoever waits for an outcome.
func (f *fsm) applied(index uint64) {
	f.lastIndex.Store(index)
	if f.props != nil {
		f.props.signal()
	}
}

// noteApplied records the last stamp applied and when (see stampBase).
func (f *fsm) noteApplied(stamp int64) {
	f.mu.Lock()
	f.lastStamp, f.lastMono = max(f.lastStamp, stamp), f.mono()
	f.mu.Unlock()
}

// stampBase is where a new leader's clock starts: the last applied stamp
// plus the local monotonic time elapsed since it applied, so the log's
// time runs on through a failover without jumping to any wall clock.
// zero reports a log that has never been stamped.
func (f *fsm) stampBase() (base int64, zero bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stamp := max(f.lastStamp, f.m.Applied())
	if stamp == 0 {
		return 0, true
	}
	return stamp + max(f.mono()-f.lastMono, 0), false
}

// Snapshot opens a point-in-time view; Persist writes it while applies go
// on (copy-on-write per slot).
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	v, err := f.m.Freeze(persist.EncodeSlotUnordered, persist.OrderRecords)
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{v: v, f: f}, nil
}

// Restore replaces the state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.m.Clear()
	h, err := persist.LoadSnapshot(rc, f.m.Store())
	if err != nil {
		return fmt.Errorf("cluster: restore snapshot: %w", err)
	}
	f.m.Restore(h.Applied)
	f.mu.Lock()
	f.lastStamp, f.lastMono = h.Applied, f.mono()
	f.mu.Unlock()
	f.restores.Add(1)
	if f.props != nil {
		f.props.signal()
	}
	return nil
}

type fsmSnapshot struct {
	v *machine.Frozen
	f *fsm
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	// Created is the applied instant too: a snapshot records no clock.
	info, err := persist.WriteFrozen(sink, s.v, persist.Header{Created: s.v.Applied()})
	if err != nil {
		return errors.Join(err, sink.Cancel())
	}
	if info.Skipped != nil {
		s.f.skipped.Add(int64(len(info.Skipped.Keys)))
		if s.f.log != nil {
			s.f.log.Error("snapshot left out keys whose state could not be encoded", "count", len(info.Skipped.Keys),
				"keys", info.Skipped.Keys, "err", info.Skipped)
		}
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.v.Release() }
