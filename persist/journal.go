package persist

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/quota"
)

// The journal carries quota changes from commands to the quota store.
//
// Commands append under their slot lock, so changes to one key enter the
// journal in the order they were applied; appending only copies bytes into
// memory (no I/O under a lock). One writer goroutine takes everything
// queued, writes it as one Pebble batch, and then, for FsyncAlways, syncs:
// the changes that queued while one sync ran share the next one, so many
// connections share each fsync (group commit). A command that must reply
// only once its change is on disk waits for its sequence number after
// releasing its lock.

// maxBacklog is how many queued bytes the journal accepts before commands
// wait for the writer even under FsyncEverySec and FsyncNo, so a disk that
// cannot keep up slows clients down instead of growing memory without
// bound.
const maxBacklog = 64 << 20

// Under FsyncEverySec and FsyncNo the writer lingers commitDelay after the
// first change queues before it commits, or until lingerBytes are queued,
// so that one Pebble commit carries the changes of many connections: a
// commit per wake-up (a handful of changes each) cost ~45 us of CPU per
// QUOTA.CHECK at one request per round trip. The delay is far inside what
// these policies may lose in a crash (the last ~1 s or ~30 s: Pebble's
// unsynced log tail is in memory either way); FsyncAlways never lingers.
const (
	commitDelay = time.Millisecond
	lingerBytes = 256 << 10
)

type op uint8

const (
	opSet op = iota + 1
	opDelete
	opFlush
	opMeta
)

// entry is one queued change; key and val are offsets into the batch's
// arena.
type entry struct {
	seq              uint64
	op               op
	keyStart, keyEnd int
	valEnd           int
}

// queue is a run of entries and the bytes they refer to.
type queue struct {
	entries []entry
	arena   []byte
}

func (q *queue) reset() {
	q.entries = q.entries[:0]
	q.arena = q.arena[:0]
}

type journal struct {
	db     *pebble.DB
	policy FsyncPolicy
	log    *slog.Logger
	// health is the store's disk state: waits end with its fault.
	health *health
	// witness records, outside the store, how far it is synced.
	witness *witness

	mu   sync.Mutex
	cond sync.Cond
	// q is what the writer has not taken yet; spare is the writer's
	// previous queue, kept for reuse.
	q, spare queue
	// seq is the last sequence number handed out; committed and synced the
	// last written to Pebble and the last known on disk.
	seq, committed, synced uint64
	err                    error
	// closed refuses new entries; stopped says the writer has exited.
	closed, stopped bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	// gc is the pending expired-record sweep (see gc.go).
	gc gcState
	// delay is how long the writer lingers (commitDelay; tests change it
	// before the first change).
	delay time.Duration

	commits, syncs, written atomic.Int64
}

func newJournal(db *pebble.DB, policy FsyncPolicy, log *slog.Logger, seq uint64, h *health) *journal {
	j := &journal{
		db: db, policy: policy, log: log, health: h,
		seq: seq, committed: seq, synced: seq, delay: commitDelay,
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	j.cond.L = &j.mu
	go j.run()
	changed, _ := h.watch()
	go j.watchHealth(changed)
	return j
}

// watchHealth wakes the waiters whenever the disk's health changes, so a
// reply waiting for a sync that a full disk holds up gets the fault. It
// takes the next change's channel before waking them, so no change falls
// between a wake-up and the next wait.
func (j *journal) watchHealth(changed <-chan struct{}) {
	for {
		select {
		case <-changed:
		case <-j.done:
			return
		}
		changed, _ = j.health.watch()
		j.mu.Lock()
		j.cond.Broadcast()
		j.mu.Unlock()
	}
}

// appendEntry queues one change and returns the sequence number to wait
// for before replying, or 0 when the reply need not wait. Call with j.mu
// held, after writing the entry's key and value to the end of j.q.arena
// from keyStart on.
func (j *journal) appendEntry(o op, keyStart, keyEnd int) uint64 {
	if j.closed {
		j.q.arena = j.q.arena[:keyStart]
		return 0
	}
	j.seq++
	// The writer is woken by the first change, and again when the queue
	// passes lingerBytes (it may be lingering).
	wake := len(j.q.entries) == 0 || (keyStart < lingerBytes && len(j.q.arena) >= lingerBytes)
	j.q.entries = append(j.q.entries, entry{seq: j.seq, op: o, keyStart: keyStart, keyEnd: keyEnd, valEnd: len(j.q.arena)})
	if wake {
		j.wakeWriter()
	}
	if j.policy == FsyncAlways || len(j.q.arena) > maxBacklog {
		return j.seq
	}
	return 0
}

// quotaChanged queues key's new state.
func (j *journal) quotaChanged(key []byte, st *quota.State) uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	start := len(j.q.arena)
	j.q.arena = append(j.q.arena, key...)
	end := len(j.q.arena)
	j.q.arena = binary.LittleEndian.AppendUint64(j.q.arena, uint64(st.ExpireAt()))
	j.q.arena = st.AppendBinary(j.q.arena)
	return j.appendEntry(opSet, start, end)
}

// recordChanged queues the new state of a key of another journaled kind:
// after the expiry, recordMarker and the kind, so a load tells it from a
// quota state (whose first byte, its period, is never recordMarker).
func (j *journal) recordChanged(key []byte, kind keyspace.Kind, expireAt int64, state []byte) uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	start := len(j.q.arena)
	j.q.arena = append(j.q.arena, key...)
	end := len(j.q.arena)
	j.q.arena = binary.LittleEndian.AppendUint64(j.q.arena, uint64(expireAt))
	j.q.arena = append(j.q.arena, recordMarker, byte(kind))
	j.q.arena = append(j.q.arena, state...)
	return j.appendEntry(opSet, start, end)
}

// quotaDeleted queues the deletion of key.
func (j *journal) quotaDeleted(key []byte) uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	start := len(j.q.arena)
	j.q.arena = append(j.q.arena, key...)
	return j.appendEntry(opDelete, start, len(j.q.arena))
}

// flushed queues the deletion of every quota.
func (j *journal) flushed() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.appendEntry(opFlush, len(j.q.arena), len(j.q.arena))
}

// meta queues a write of a store meta key.
func (j *journal) meta(key, val []byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	start := len(j.q.arena)
	j.q.arena = append(j.q.arena, key...)
	end := len(j.q.arena)
	j.q.arena = append(j.q.arena, val...)
	j.appendEntry(opMeta, start, end)
}

// lastSeq is the last sequence number handed out.
func (j *journal) lastSeq() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seq
}

// failed is the error that stopped the journal, if any.
func (j *journal) failed() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// wait blocks until change seq is as durable as a reply requires: synced
// for FsyncAlways, written to Pebble otherwise (backlog relief).
func (j *journal) wait(seq uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.err == nil {
		if j.synced >= seq || (j.policy != FsyncAlways && j.committed >= seq) {
			return nil
		}
		if j.stopped {
			return ErrClosed
		}
		if err := j.health.Err(); err != nil {
			return err
		}
		j.cond.Wait()
	}
	return j.err
}

// run is the writer goroutine.
func (j *journal) run() {
	defer close(j.done)
	var tick <-chan time.Time
	if d := j.policy.syncInterval(); d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		tick = t.C
	}
	batch := j.db.NewBatch()
	defer batch.Close()
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		select {
		case <-j.wake:
			if j.policy != FsyncAlways {
				j.linger(linger)
			}
		case <-tick:
			j.syncWAL()
			j.gcStep()
			continue
		case <-j.stop:
			j.write(batch)
			j.syncWAL()
			return
		}
		j.write(batch)
		j.gcStep()
	}
}

// linger waits j.delay for more changes to queue, less when the queue
// passes lingerBytes, a snapshot needs the changes (syncThrough wakes it)
// or the journal closes (j.stop stays closed, so the writer's loop sees
// it next).
func (j *journal) linger(t *time.Timer) {
	j.mu.Lock()
	full := len(j.q.arena) >= lingerBytes // its wake may have met the first's
	j.mu.Unlock()
	if full {
		return
	}
	t.Reset(j.delay)
	select {
	case <-t.C:
	case <-j.wake:
		t.Stop()
	case <-j.stop:
		t.Stop()
	}
}

// wakeWriter wakes the writer, or ends its linger; a wake already pending
// is enough.
func (j *journal) wakeWriter() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// write takes everything queued and commits it as one batch.
func (j *journal) write(batch *pebble.Batch) {
	j.mu.Lock()
	q := j.q
	j.q, j.spare = j.spare, queue{}
	j.q.reset()
	failed := j.err != nil
	j.mu.Unlock()
	if len(q.entries) == 0 || failed {
		j.recycle(q)
		return
	}
	batch.Reset()
	var key []byte
	for _, e := range q.entries {
		k := q.arena[e.keyStart:e.keyEnd]
		v := q.arena[e.keyEnd:e.valEnd]
		switch e.op {
		case opSet:
			key = appendQuotaKey(key[:0], k)
			batch.Set(key, v, nil)
		case opDelete:
			key = appendQuotaKey(key[:0], k)
			batch.Delete(key, nil)
		case opFlush:
			batch.DeleteRange(quotaStart, quotaEnd, nil)
			batch.Set(metaFlush, binary.AppendUvarint(key[:0], e.seq), nil)
		case opMeta:
			batch.Set(k, v, nil)
		}
	}
	last := q.entries[len(q.entries)-1].seq
	batch.Set(metaSeq, binary.AppendUvarint(key[:0], last), nil)
	sync := j.policy == FsyncAlways
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	err := batch.Commit(opts)
	j.commits.Add(1)
	j.written.Add(int64(len(q.entries)))
	if sync && err == nil {
		j.syncs.Add(1)
	}
	j.mu.Lock()
	if err != nil {
		j.fail(err)
	} else {
		j.committed = last
		if sync {
			j.synced = last
			j.witness.record(last)
		}
	}
	j.cond.Broadcast()
	j.mu.Unlock()
	j.recycle(q)
}

// recycle keeps q's memory for the next swap.
func (j *journal) recycle(q queue) {
	q.reset()
	j.mu.Lock()
	if cap(q.arena) <= maxBacklog {
		j.spare = q
	}
	j.mu.Unlock()
}

// syncWAL makes everything committed so far durable.
func (j *journal) syncWAL() {
	j.mu.Lock()
	target, pending := j.committed, j.committed > j.synced && j.err == nil
	j.mu.Unlock()
	if !pending {
		return
	}
	err := j.db.LogData(nil, pebble.Sync)
	if err == nil {
		j.syncs.Add(1)
	}
	j.mu.Lock()
	if err != nil {
		j.fail(err)
	} else if target > j.synced {
		j.synced = target
		j.witness.record(target)
	}
	j.cond.Broadcast()
	j.mu.Unlock()
}

// syncThrough makes every change numbered up to seq durable, whatever the
// policy: it waits for the writer to commit them, then syncs. A snapshot
// calls it before it counts as taken, so the quota store always holds, on
// disk, every quota change a snapshot holds (a crash right after a SAVE
// under --quota-fsync no loses nothing the snapshot has).
func (j *journal) syncThrough(seq uint64) error {
	j.wakeWriter()
	j.mu.Lock()
	for j.committed < seq && j.err == nil && !j.stopped {
		if err := j.health.Err(); err != nil {
			j.mu.Unlock()
			return err
		}
		j.cond.Wait()
	}
	done := j.synced >= seq
	j.mu.Unlock()
	if !done {
		j.syncWAL()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.synced >= seq:
		return nil
	case j.err != nil:
		return j.err
	case j.stopped:
		return ErrClosed
	}
	if err := j.health.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: sync did not reach change %d", ErrJournal, seq)
}

// fail records the first write error; call with j.mu held.
func (j *journal) fail(err error) {
	if j.err == nil {
		j.err = fmt.Errorf("%w: %w", ErrJournal, err)
		j.log.Error("quota store write failed; quota writes are refused until restart", "err", err)
	}
}

// close writes and syncs everything queued and stops the writer. Changes
// queued afterwards are dropped.
func (j *journal) close() error {
	j.mu.Lock()
	already := j.closed
	j.closed = true
	j.mu.Unlock()
	if !already {
		close(j.stop)
	}
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stopped = true
	j.cond.Broadcast()
	return j.err
}
