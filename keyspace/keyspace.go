package keyspace

import (
	"errors"
	"hash/maphash"
	"sync"

	"github.com/sluice-rl/sluice/cluster"
)

// Errors returned by the keyspace.
var (
	// ErrWrongType: the key holds a value of another kind.
	ErrWrongType = errors.New("keyspace: key holds the wrong kind of value")
	// ErrSlotFull: one slot's records would pass 4 GiB.
	ErrSlotFull = errors.New("keyspace: slot is full")
)

// Keyspace is every key sluice holds.
type Keyspace struct {
	seed  maphash.Seed
	slots [cluster.SlotCount]Slot
}

// New returns an empty keyspace.
func New() *Keyspace {
	ks := &Keyspace{seed: maphash.MakeSeed()}
	for i := range ks.slots {
		ks.slots[i].seed = ks.seed
	}
	return ks
}

// Slot is one hash slot's keys behind one lock. Lock it with
// Keyspace.Lock; every method needs the lock held.
type Slot struct {
	mu   sync.Mutex
	seed maphash.Seed
	// last is the latest instant the slot was locked at.
	last int64
	t    table
}

// Lock locks slot and returns it with the instant to use: now, or the
// slot's latest instant if now is earlier, so a slot never sees time go
// backwards.
func (ks *Keyspace) Lock(slot int, now int64) (*Slot, int64) {
	s := &ks.slots[slot]
	s.mu.Lock()
	if now < s.last {
		now = s.last
	} else {
		s.last = now
	}
	return s, now
}

// LockKey is Lock on key's slot.
func (ks *Keyspace) LockKey(key []byte, now int64) (*Slot, int64) {
	return ks.Lock(cluster.Slot(key), now)
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

// Get finds key at instant now. A key that has expired is deleted and
// reported absent: an expired key is indistinguishable from a missing one.
func (s *Slot) Get(key []byte, now int64) (Entry, bool) {
	r, ok := s.t.find(maphash.Bytes(s.seed, key), key)
	if !ok {
		return Entry{}, false
	}
	if exp := s.t.wordAt(r.word); exp != 0 && exp <= now {
		s.t.remove(s.seed, r, true)
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
	if e.r.kind == KindGCRA {
		return nil
	}
	return s.t.objs[s.t.objAt(e.r.word)]
}

// SetObject replaces the state of an entry of a kind other than GCRA.
func (s *Slot) SetObject(e Entry, obj any) {
	if e.r.kind != KindGCRA {
		s.t.objs[s.t.objAt(e.r.word)] = obj
	}
}

// Insert adds key, which Get has just reported absent. For KindGCRA word is
// the theoretical arrival time and obj is ignored; for other kinds word is
// the expiry instant (0 = never) and obj the state.
func (s *Slot) Insert(key []byte, kind Kind, word int64, obj any) (Entry, error) {
	r, ok := s.t.insert(s.seed, key, kind, word, obj)
	if !ok {
		return Entry{}, ErrSlotFull
	}
	return Entry{r}, nil
}

// Delete removes the entry.
func (s *Slot) Delete(e Entry) { s.t.remove(s.seed, e.r, true) }

// Len is the number of keys in the slot, expired ones not yet swept
// included.
func (s *Slot) Len() int { return s.t.live }

// Keys calls fn with each live key of the slot at now, in insertion order,
// until fn returns false. fn must not change the slot and must copy key if
// it keeps it.
func (s *Slot) Keys(now int64, fn func(key []byte, e Entry) bool) {
	s.t.each(0, func(r ref, key []byte) bool {
		if exp := s.t.wordAt(r.word); exp != 0 && exp <= now {
			return true
		}
		return fn(key, Entry{r})
	})
}

// Bytes is the memory the slot's table holds.
func (s *Slot) Bytes() int { return s.t.bytes() }

// flush drops every key.
func (s *Slot) flush() { s.t = table{} }

// Flush drops every key of every slot.
func (ks *Keyspace) Flush() {
	for i := range ks.slots {
		s := &ks.slots[i]
		s.mu.Lock()
		s.flush()
		s.mu.Unlock()
	}
}

// Stats are counts over the whole keyspace.
type Stats struct {
	// Keys counts keys, expired ones not yet swept included.
	Keys int
	// Bytes is the memory the slot tables hold.
	Bytes int
}

// Stats walks every slot.
func (ks *Keyspace) Stats() Stats {
	var st Stats
	for i := range ks.slots {
		s := &ks.slots[i]
		s.mu.Lock()
		st.Keys += s.t.live
		st.Bytes += s.t.bytes()
		s.mu.Unlock()
	}
	return st
}

// CountInSlot is the number of live keys in one slot at now.
func (ks *Keyspace) CountInSlot(slot int, now int64) int {
	s, now := ks.Lock(slot, now)
	defer s.Unlock()
	n := 0
	s.Keys(now, func([]byte, Entry) bool { n++; return true })
	return n
}
