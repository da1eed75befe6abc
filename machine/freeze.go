package machine

import (
	"errors"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/slot"
)

// ErrFrozen: a point-in-time view is already open; one at a time.
var ErrFrozen = errors.New("machine: a snapshot view is already open")

// SlotEncoder appends the keys of slot s live at instant applied, in the
// caller's format (a snapshot's records), and the number of keys written.
// It runs under the slot's lock.
type SlotEncoder func(dst []byte, s *keyspace.Slot, applied int64) ([]byte, int, error)

// SlotOrder puts a slot's encoded records in their canonical order,
// outside the slot's lock (nil: the encoder wrote them in order). An
// encoder that only copies under the lock and leaves the sort to this
// keeps a slot of many keys from stalling the apply that first writes it.
type SlotOrder func(b []byte) ([]byte, error)

// Frozen is a point-in-time view of the machine, read while applies go on:
// copy-on-write per slot. Each slot is encoded by whoever locks it first
// after the freeze — a write about to change it, or the reader — so the
// view holds every slot exactly as it was at the freeze, while applies
// wait only for the encoding of a slot they touch first (microseconds),
// never for the whole keyspace.
type Frozen struct {
	m       *Machine
	applied int64
	encode  SlotEncoder
	order   SlotOrder
	// Slot i's fields are guarded by slot i's lock.
	slots [slot.Count]frozenSlot
}

type frozenSlot struct {
	taken bool
	b     []byte
	keys  int
	err   error
}

// Freeze opens a point-in-time view of the state as it is now. Call it
// when no apply is running (a replicated state machine snapshots between
// applies); Release it when done.
func (m *Machine) Freeze(encode SlotEncoder, order SlotOrder) (*Frozen, error) {
	f := &Frozen{m: m, applied: m.applied.Load(), encode: encode, order: order}
	if !m.frozen.CompareAndSwap(nil, f) {
		return nil, ErrFrozen
	}
	return f, nil
}

// Applied is the applied instant the view was frozen at.
func (f *Frozen) Applied() int64 { return f.applied }

// take encodes slot i as the view holds it, unless that is done; the
// caller holds slot i's lock.
func (f *Frozen) take(i int, s *keyspace.Slot) {
	fs := &f.slots[i]
	if fs.taken {
		return
	}
	fs.taken = true
	fs.b, fs.keys, fs.err = f.encode(nil, s, f.applied)
}

// Slot returns slot i's encoding as of the freeze and its key count, and
// lets go of it. Call it once per slot.
func (f *Frozen) Slot(i int) ([]byte, int, error) {
	s := f.m.keys.Lock(i)
	f.take(i, s)
	fs := &f.slots[i]
	b, n, err := fs.b, fs.keys, fs.err
	fs.b = nil
	s.Unlock()
	if f.order != nil && len(b) > 0 {
		ordered, oerr := f.order(b)
		if oerr != nil {
			return nil, 0, oerr
		}
		b = ordered
	}
	return b, n, err
}

// Release closes the view: writes stop copying slots for it.
func (f *Frozen) Release() { f.m.frozen.CompareAndSwap(f, nil) }

// beforeWrite keeps an open view's copy of slot i before a write changes
// it; the caller holds slot i's lock.
func (m *Machine) beforeWrite(i int, s *keyspace.Slot) {
	if f := m.frozen.Load(); f != nil {
		f.take(i, s)
	}
}

// Clear drops every key before a restore fills the machine from a
// snapshot. An open point-in-time view keeps what it holds: every slot it
// has not yet encoded is encoded first, so a snapshot being written while
// a restore replaces the state never mixes the two.
func (m *Machine) Clear() {
	m.keys.FlushAll(func(slots func(i int) *keyspace.Slot) {
		for i := range slot.Count {
			m.beforeWrite(i, slots(i))
		}
	})
}
