// Package roomtest helps test a room of the state machine on its own,
// with a fake apply over a keyspace of the test's (see package room).
package roomtest

import (
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/slot"
)

// Locks is a fake apply's slot locks, checking the discipline the core's
// apply relies on: a slot is locked once, and unlocked only if held.
type Locks struct {
	T    testing.TB
	Keys *keyspace.Keyspace
	held map[int]bool
}

// NewLocks locks slots of keys for t.
func NewLocks(t testing.TB, keys *keyspace.Keyspace) *Locks {
	return &Locks{T: t, Keys: keys, held: map[int]bool{}}
}

// LockKey locks key's slot.
func (l *Locks) LockKey(key []byte) *keyspace.Slot { return l.LockSlot(slot.Of(key)) }

// LockSlot locks slot i; locking a held slot fails the test (the apply
// would deadlock).
func (l *Locks) LockSlot(i int) *keyspace.Slot {
	if l.held[i] {
		l.T.Fatalf("slot %d locked twice", i)
	}
	l.held[i] = true
	return l.Keys.Lock(i)
}

// Unlock releases s, which must be held.
func (l *Locks) Unlock(s *keyspace.Slot) {
	for i := range l.held {
		if l.Keys.Slot(i) == s {
			delete(l.held, i)
			s.Unlock()
			return
		}
	}
	l.T.Fatal("unlock of a slot not held")
}

// Holds reports whether key's slot is held.
func (l *Locks) Holds(key []byte) bool { return l.held[slot.Of(key)] }

// Held is how many slots are held (0 after a command returns).
func (l *Locks) Held() int { return len(l.held) }
