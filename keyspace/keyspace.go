package keyspace

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"sync"

	"github.com/sluice-rl/sluice/keyspace/offheap"
	"github.com/sluice-rl/sluice/slot"
)

// Errors returned by the keyspace.
var (
	// ErrWrongType: the key holds a value of another kind.
	ErrWrongType = errors.New("keyspace: key holds the wrong kind of value")
	// ErrSlotFull: one slot's records would pass 4 GiB.
	ErrSlotFull = errors.New("keyspace: slot is full")
	// ErrNoMemory: the operating system refused memory for the keyspace.
	// (The key is not stored; a replica that could store it would differ,
	// as after any local fault.)
	ErrNoMemory = errors.New("keyspace: out of memory")
	// ErrStateSize: an inline state longer than MaxInlineState.
	ErrStateSize = errors.New("keyspace: inline state too long")
	// ErrNotInline: SetState on an entry whose state is an object.
	ErrNotInline = errors.New("keyspace: entry has no inline state")
)

func errNoMemory(err error) error { return fmt.Errorf("%w: %w", ErrNoMemory, err) }

// Keyspace is every key sluice holds.
type Keyspace struct {
	seed  maphash.Seed
	heap  *offheap.Heap
	slots [slot.Count]Slot
}

// New returns an empty keyspace. Its records live in off-heap memory of
// its own, given back when the keyspace is garbage collected.
func New() *Keyspace {
	ks := &Keyspace{seed: maphash.MakeSeed(), heap: offheap.New()}
	for i := range ks.slots {
		ks.slots[i].seed = ks.seed
		ks.slots[i].t.heap = ks.heap
	}
	// Nothing can reach a slot's memory once the keyspace is unreachable:
	// slots live inside it, and keys read from them are copied by whoever
	// keeps them.
	runtime.AddCleanup(ks, func(h *offheap.Heap) { h.Close() }, ks.heap)
	return ks
}

// Slot is one hash slot's keys behind one lock. Lock it with
// Keyspace.Lock; every method needs the lock held.
//
// A slot has no clock of its own: every method that cares about expiry is
// given the instant to judge it at, and the caller (the state machine)
// decides which instant that is. Nothing here moves time.
type Slot struct {
	mu   sync.Mutex
	seed maphash.Seed
	t    table
}

// Lock locks slot number i and returns it.
func (ks *Keyspace) Lock(i int) *Slot {
	s := &ks.slots[i]
	s.mu.Lock()
	return s
}

// LockKey is Lock on key's slot.
func (ks *Keyspace) LockKey(key []byte) *Slot {
	return ks.Lock(slot.Of(key))
}

// Unlock releases the slot.
func (s *Slot) Unlock() { s.mu.Unlock() }

// Entry is a live key found in a slot. It is valid until the slot is next
// changed by Insert or Delete, or unlocked.
type Entry struct {
	r ref
}

// Kind is what the key holds.
func (e Entry) Kind() Kind { return e.r.kind }

// Get finds key at instant now. A key that has expired by now is reported
// absent, exactly as a missing one, and left where it is: reading never
// changes the slot. The record goes when Insert reuses its key or Sweep
// finds it.
func (s *Slot) Get(key []byte, now int64) (Entry, bool) {
	r, ok := s.t.find(maphash.Bytes(s.seed, key), key)
	if !ok {
		return Entry{}, false
	}
	if exp := s.t.wordAt(r.word); exp != 0 && exp <= now {
		return Entry{}, false
	}
	return Entry{r}, true
}

// GetKind is Get for a command that works on one kind: a key of another
// kind is ErrWrongType.
func (s *Slot) GetKind(key []byte, kind Kind, now int64) (Entry, bool, error) {
	e, ok := s.Get(key, now)
	if ok && e.r.kind != kind {
		return Entry{}, false, ErrWrongType
	}
	return e, ok, nil
}

// Word is the entry's word: a GCRA key's theoretical arrival time, else the
// instant the key expires (0 = never).
func (s *Slot) Word(e Entry) int64 { return s.t.wordAt(e.r.word) }

// SetWord replaces the entry's word in place.
func (s *Slot) SetWord(e Entry, w int64) { s.t.setWordAt(e.r.word, w) }

// ExpireAt is the instant the entry expires, 0 if never.
func (s *Slot) ExpireAt(e Entry) int64 { return s.t.wordAt(e.r.word) }

// Object is the state of an entry of a kind other than GCRA.
func (s *Slot) Object(e Entry) any {
	if e.r.kind == KindGCRA || e.r.inline {
		return nil
	}
	return s.t.objs[s.t.objAt(e.r.word)]
}

// SetObject replaces the state of an entry of a kind other than GCRA.
func (s *Slot) SetObject(e Entry, obj any) {
	if e.r.kind != KindGCRA && !e.r.inline {
		s.t.objs[s.t.objAt(e.r.word)] = obj
	}
}

// Insert adds key, which Get has just reported absent (an expired record
// of the key, if any, is replaced). For KindGCRA word is the theoretical
// arrival time and obj is ignored; for other kinds word is the expiry
// instant (0 = never) and obj the state.
func (s *Slot) Insert(key []byte, kind Kind, word int64, obj any) (Entry, error) {
	return s.insert(key, kind, word, obj, false, nil)
}

// InsertState is Insert for a key whose state is a few bytes (at most
// MaxInlineState) kept in its record, off the Go heap, rather than an
// object: state is copied. Read it with State, change it with SetState.
func (s *Slot) InsertState(key []byte, kind Kind, word int64, state []byte) (Entry, error) {
	return s.insert(key, kind, word, nil, true, state)
}

func (s *Slot) insert(key []byte, kind Kind, word int64, obj any, inline bool, state []byte) (Entry, error) {
	h := maphash.Bytes(s.seed, key)
	if old, ok := s.t.find(h, key); ok {
		// An expired record of the same shape is overwritten where it is:
		// a key that keeps expiring and coming back (a limiter at rest
		// between bursts) then costs no garbage, growth or compaction.
		// Where a record sits is never observable: everything that lists
		// keys sorts them.
		if r, ok := s.t.reuse(old, kind, word, obj, inline, state); ok {
			return Entry{r}, nil
		}
		s.t.remove(s.seed, old, true)
	}
	r, err := s.t.insert(s.seed, key, kind, word, obj, inline, state)
	if err != nil {
		return Entry{}, err
	}
	return Entry{r}, nil
}

// Inline reports whether the entry keeps its state in its record
// (InsertState) rather than as an object.
func (e Entry) Inline() bool { return e.r.inline }

// State is the state of an entry inserted with InsertState (nil for
// others). It is valid until the slot next changes; copy it to keep it.
func (s *Slot) State(e Entry) []byte {
	if !e.r.inline {
		return nil
	}
	return s.t.stateAt(e.r.word)
}

// SetState replaces the state of an entry inserted with InsertState and
// returns the entry, which may have moved. Every other entry of the slot
// stays valid: no record is rebuilt or compacted here.
func (s *Slot) SetState(e Entry, state []byte) (Entry, error) {
	if !e.r.inline {
		return e, ErrNotInline
	}
	r, err := s.t.setState(e.r, state)
	return Entry{r}, err
}

// Delete removes the entry.
func (s *Slot) Delete(e Entry) { s.t.remove(s.seed, e.r, true) }

// Len is the number of keys in the slot, expired ones not yet swept
// included.
func (s *Slot) Len() int { return s.t.live }

// Live is the number of keys of the slot live at now.
func (s *Slot) Live(now int64) int { return s.LiveWhere(now, nil) }

// LiveWhere is Live counting only the kinds keep reports (nil: all).
func (s *Slot) LiveWhere(now int64, keep func(Kind) bool) int {
	n := 0
	s.t.each(0, func(r ref, _ []byte) bool {
		if exp := s.t.wordAt(r.word); (exp == 0 || exp > now) && (keep == nil || keep(r.kind)) {
			n++
		}
		return true
	})
	return n
}

// Keys calls fn with each live key of the slot at now, in byte order of
// the keys, until fn returns false. That order is a function of the keys
// alone, not of the history that placed the records (a restore, a rebuild
// or a sweep moves them), so replies, digests and snapshots that follow it
// are the same on every replica. fn must not change the slot and must copy
// key if it keeps it.
func (s *Slot) Keys(now int64, fn func(key []byte, e Entry) bool) {
	var refs []ref
	s.t.each(0, func(r ref, _ []byte) bool {
		if exp := s.t.wordAt(r.word); exp == 0 || exp > now {
			refs = append(refs, r)
		}
		return true
	})
	keyOf := func(r ref) []byte {
		_, k, _, _ := s.t.recordAt(r.off)
		return k
	}
	slices.SortFunc(refs, func(a, b ref) int { return bytes.Compare(keyOf(a), keyOf(b)) })
	for _, r := range refs {
		if !fn(keyOf(r), Entry{r}) {
			return
		}
	}
}

// KeysUnordered calls fn for every key live at now, in the slot's own
// order (which differs between replicas), until fn returns false: for a
// reader that copies the records under the lock and orders them after it,
// so a slot of many keys is not held for a sort. fn must not change the
// slot and must copy key if it keeps it.
func (s *Slot) KeysUnordered(now int64, fn func(key []byte, e Entry) bool) {
	s.t.each(0, func(r ref, key []byte) bool {
		if exp := s.t.wordAt(r.word); exp == 0 || exp > now {
			return fn(key, Entry{r})
		}
		return true
	})
}

// Bytes is the memory the slot's table holds.
func (s *Slot) Bytes() int { return s.t.bytes() }

// flush drops every key.
func (s *Slot) flush() { s.t.release() }

// Flush drops every key of every slot.
func (ks *Keyspace) Flush() {
	for i := range ks.slots {
		s := &ks.slots[i]
		s.mu.Lock()
		s.flush()
		s.mu.Unlock()
	}
	ks.heap.GiveBack()
}

// Stats are counts over the whole keyspace.
type Stats struct {
	// Keys counts keys, expired ones not yet swept included.
	Keys int
	// Reservations counts the keys of KindReservation, likewise; Kinds
	// the keys of each kind.
	Reservations int
	Kinds        [MaxKinds]int
	// Bytes is the memory the slot tables hold.
	Bytes int
	// OffHeap is the keyspace's off-heap memory: blocks handed out, and
	// what is held (possibly resident) and mapped for them.
	OffHeap offheap.Stats
}

// Stats walks every slot.
func (ks *Keyspace) Stats() Stats {
	var st Stats
	for i := range ks.slots {
		s := &ks.slots[i]
		s.mu.Lock()
		st.Keys += s.t.live
		for k, n := range s.t.byKind {
			st.Kinds[k] += n
		}
		st.Reservations += s.t.byKind[KindReservation]
		st.Bytes += s.t.bytes()
		s.mu.Unlock()
	}
	st.OffHeap = ks.heap.Stats()
	return st
}

// CountInSlot is the number of live keys in one slot at now.
func (ks *Keyspace) CountInSlot(i int, now int64) int { return ks.CountInSlotWhere(i, now, nil) }

// CountInSlotWhere is CountInSlot counting only the kinds keep reports.
func (ks *Keyspace) CountInSlotWhere(i int, now int64, keep func(Kind) bool) int {
	s := ks.Lock(i)
	defer s.Unlock()
	return s.LiveWhere(now, keep)
}

// LiveLocked is Live for a caller that holds every slot's lock already,
// counting only the kinds keep reports (nil: all).
func (ks *Keyspace) LiveLocked(now int64, keep func(Kind) bool) int {
	n := 0
	for i := range ks.slots {
		n += ks.slots[i].LiveWhere(now, keep)
	}
	return n
}

// Slot returns slot i, whose lock the caller holds.
func (ks *Keyspace) Slot(i int) *Slot { return &ks.slots[i] }

// Live is the number of keys live at now, every slot walked: exact, where
// Stats counts expired keys not yet swept. keep, when set, says which
// kinds count.
func (ks *Keyspace) Live(now int64, keep func(Kind) bool) int {
	n := 0
	for i := range ks.slots {
		n += ks.CountInSlotWhere(i, now, keep)
	}
	return n
}
