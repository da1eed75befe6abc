package room

import (
	"slices"
	"strconv"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/slot"
)

// SlotLocks are slots an apply holds at once: a transaction's (EXEC), or
// a decision's over several slots, locked in slot order.
type SlotLocks struct {
	ks *keyspace.Keyspace
	// All is set when every slot is held; else slots lists them, sorted.
	All   bool
	Slots []int
}

// Slot returns held Slot i; a Slot the transaction did not lock is a bug
// in the key positions (the apply boundary turns the panic into an error).
func (l *SlotLocks) Slot(i int) *keyspace.Slot {
	if !l.All {
		if _, ok := slices.BinarySearch(l.Slots, i); !ok {
			panic("room: a transaction's command touched slot " + strconv.Itoa(i) + ", which it did not lock")
		}
	}
	return l.ks.Slot(i)
}

// Reset empties l for a new set of slots of ks.
func (l *SlotLocks) Reset(ks *keyspace.Keyspace) {
	l.ks, l.All, l.Slots = ks, false, l.Slots[:0]
}

// Lock locks the slots listed, in slot order (sorting them and dropping
// duplicates first: two applies locking in one order never deadlock).
func (l *SlotLocks) Lock() {
	slices.Sort(l.Slots)
	l.Slots = slices.Compact(l.Slots)
	if l.All {
		for i := range slot.Count {
			l.ks.Lock(i)
		}
		return
	}
	for _, i := range l.Slots {
		l.ks.Lock(i)
	}
}

// Unlock releases what Lock took.
func (l *SlotLocks) Unlock() {
	if l.All {
		for i := range slot.Count {
			l.ks.Slot(i).Unlock()
		}
		return
	}
	for _, i := range l.Slots {
		l.ks.Slot(i).Unlock()
	}
}
