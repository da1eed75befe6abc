package keyspace

import "github.com/sluice-rl/sluice/keyspace/offheap"

// View reads a keyspace and cannot change it: what readers outside the
// state machine's apply get (SCAN, KEYS, CLUSTER, INFO, metrics, the status
// page). Only an apply, a restore and the sweep write, through *Keyspace.
type View struct{ ks *Keyspace }

// View is a read-only view of ks.
func (ks *Keyspace) View() View { return View{ks} }

// Stats is Keyspace.Stats.
func (v View) Stats() Stats { return v.ks.Stats() }

// OffHeap is the off-heap memory's totals, without walking the slots.
func (v View) OffHeap() offheap.Stats { return v.ks.heap.Stats() }

// CountInSlot is Keyspace.CountInSlot.
func (v View) CountInSlot(i int, now int64) int { return v.ks.CountInSlot(i, now) }

// CountInSlotWhere is Keyspace.CountInSlotWhere.
func (v View) CountInSlotWhere(i int, now int64, keep func(Kind) bool) int {
	return v.ks.CountInSlotWhere(i, now, keep)
}

// Live is Keyspace.Live.
func (v View) Live(now int64) int { return v.ks.Live(now, nil) }

// Read locks slot i for reading; Unlock it when done.
func (v View) Read(i int) ReadSlot { return ReadSlot{v.ks.Lock(i)} }

// ReadKey locks key's slot for reading; Unlock it when done.
func (v View) ReadKey(key []byte) ReadSlot { return ReadSlot{v.ks.LockKey(key)} }

// ReadSlot is a locked slot that can be read, not changed.
type ReadSlot struct{ s *Slot }

// Get is Slot.Get.
func (r ReadSlot) Get(key []byte, now int64) (Entry, bool) { return r.s.Get(key, now) }

// Keys is Slot.Keys.
func (r ReadSlot) Keys(now int64, fn func(key []byte, e Entry) bool) { r.s.Keys(now, fn) }

// Len is Slot.Len.
func (r ReadSlot) Len() int { return r.s.Len() }

// Unlock releases the slot.
func (r ReadSlot) Unlock() { r.s.Unlock() }
