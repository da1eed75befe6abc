package keyspace

import (
	"hash/maphash"

	"github.com/sluice-rl/sluice/slot"
)

// SweepCursor is where the next Sweep resumes. The zero value starts at
// the first record of slot 0.
type SweepCursor struct {
	ks   *Keyspace
	slot int
	off  int
	// gen is the slot table's generation off was read in: records move
	// when it changes, and the slot is then swept from its start.
	gen uint32
}

// Sweep deletes keys expired at instant now (which it does not move:
// the caller gives the state machine's applied instant, at which those
// keys already read as absent, so a sweep changes nothing a command can
// observe), examining at most budget
// records from cursor on, one slot lock at a time. It returns how many
// records it examined and removed; a sweeper that finds many expired keys
// may call it again at once, one that finds few can wait.
func (ks *Keyspace) Sweep(now int64, cursor *SweepCursor, budget int) (examined, removed int) {
	if cursor.ks != ks {
		*cursor = SweepCursor{ks: ks}
	}
	for budget > 0 {
		s := ks.Lock(cursor.slot)
		if cursor.gen != s.t.gen {
			cursor.off, cursor.gen = 0, s.t.gen
		}
		n, r, done := s.sweep(now, cursor.off, budget, &cursor.off)
		cursor.gen = s.t.gen
		s.Unlock()
		examined += n
		removed += r
		if done {
			cursor.slot = (cursor.slot + 1) % slot.Count
			cursor.off = 0
		}
		// An empty slot still costs its lock: count it as one record so an
		// empty keyspace bounds its work too.
		budget -= max(n, 1)
	}
	return examined, removed
}

// sweep examines up to budget records from off, removing expired ones. It
// stores the offset to resume from in next and reports whether the slot's
// end was reached.
func (s *Slot) sweep(now int64, off, budget int, next *int) (examined, removed int, done bool) {
	t := &s.t
	for off < len(t.arena) && examined < budget {
		kind, key, word, end := t.recordAt(off)
		if kind != KindNone {
			examined++
			if exp := t.wordAt(word); exp != 0 && exp <= now {
				if r, ok := t.find(maphash.Bytes(s.seed, key), key); ok {
					t.remove(s.seed, r, false)
					removed++
				}
			}
		}
		off = end
	}
	done = off >= len(t.arena)
	if removed > 0 && t.maybeCompact(s.seed) {
		off = 0
		done = done || t.live == 0
	}
	*next = off
	return examined, removed, done
}
