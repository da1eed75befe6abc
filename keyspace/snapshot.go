package keyspace

// FlushAll drops every key of every slot as one step: it takes every
// slot's lock, in slot order, calls before (when not nil), flushes them
// all and only then releases them. No command sees part of the keyspace
// flushed, and a journal written from before records the flush between
// the changes before it and those after it. (Code that holds two slot
// locks at once must take them in slot order too.)
//
// before (when not nil) runs first, with every slot locked, and can reach
// each slot as it was (a point-in-time view copies them before they go).
func (ks *Keyspace) FlushAll(before func(slots func(i int) *Slot)) {
	for i := range ks.slots {
		ks.slots[i].mu.Lock()
	}
	// Deferred, so a panic in before or in a flush (recovered by the
	// machine's apply boundary) leaves no slot locked.
	defer func() {
		for i := range ks.slots {
			ks.slots[i].mu.Unlock()
		}
	}()
	ks.FlushAllLocked(before)
}

// FlushAllLocked is FlushAll for a caller that holds every slot's lock
// already (a transaction that locked them all).
func (ks *Keyspace) FlushAllLocked(before func(slots func(i int) *Slot)) {
	if before != nil {
		before(func(i int) *Slot { return &ks.slots[i] })
	}
	for i := range ks.slots {
		ks.slots[i].flush()
	}
	// Everything is free: give it all back now, not in the next batch.
	ks.heap.GiveBack()
}
