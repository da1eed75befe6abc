package keyspace

// FlushAll drops every key of every slot as one step: it takes every
// slot's lock, in slot order, flushes them all, calls during (when not
// nil) and only then releases them. No command sees part of the keyspace
// flushed, and a journal written from during records the flush between
// the changes before it and those after it. (Code that holds two slot
// locks at once must take them in slot order too.)
func (ks *Keyspace) FlushAll(during func()) {
	for i := range ks.slots {
		ks.slots[i].mu.Lock()
	}
	for i := range ks.slots {
		ks.slots[i].flush()
	}
	if during != nil {
		during()
	}
	for i := range ks.slots {
		ks.slots[i].mu.Unlock()
	}
}
