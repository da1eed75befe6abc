package decide

import (
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/slot"
)

// Versions before domain records were kept in the domain's own slot keyed
// the overrides and scale of a domain holding braces, or empty, under a
// hashed tag of another slot (policy.LegacyDomainKey). A restore moves
// such records to their key of today, and the move is journaled once the
// machine has a durable store, so the store holds the layout this version
// reads. Moving is idempotent: a record already at its new key (the
// newer: the move wrote it, or a change since) wins, and the old one goes.

// movedRecord is a domain record Restore moved.
type movedRecord struct {
	from, to []byte
	kind     keyspace.Kind
	expireAt int64
	obj      any
	// kept is false when a record was already at the new key: only the
	// old one was dropped.
	kept bool
}

// moveLegacyRecords moves the records under a legacy key (see above).
// Nothing else runs while a machine restores.
func (m *Room) moveLegacyRecords(now int64, d Durability) {
	m.moved = m.moved[:0] // what an earlier restore moved is gone with its state
	var found []movedRecord
	for i := range slot.Count {
		s := m.keys.Lock(i)
		if s.Len() > 0 {
			s.Keys(now, func(key []byte, e keyspace.Entry) bool {
				if e.Kind() != keyspace.KindOverride && e.Kind() != keyspace.KindScale {
					return true
				}
				if to, ok := policy.LegacyDomainKey(key); ok {
					found = append(found, movedRecord{from: append([]byte(nil), key...), to: to,
						kind: e.Kind(), expireAt: s.ExpireAt(e), obj: s.Object(e)})
				}
				return true
			})
		}
		s.Unlock()
	}
	for _, r := range found {
		s := m.keys.LockKey(r.from)
		if e, ok := s.Get(r.from, now); ok {
			s.Delete(e)
		}
		s.Unlock()
		s = m.keys.LockKey(r.to)
		if _, ok := s.Get(r.to, now); !ok {
			if _, err := s.Insert(r.to, r.kind, r.expireAt, r.obj); err == nil {
				r.kept = true
			} else {
				m.log.Error("a domain record could not move to its new key; it is dropped", "key", string(r.from), "err", err)
			}
		}
		s.Unlock()
		m.moved = append(m.moved, r)
	}
	if len(found) > 0 {
		m.log.Info("moved domain records to the domain's own slot", "records", len(found))
	}
	if d != nil {
		m.journalMoves(d)
	}
}

// journalMoves journals what moveLegacyRecords moved, to d.
func (m *Room) journalMoves(d Durability) {
	for _, r := range m.moved {
		s := m.keys.LockKey(r.from)
		d.QuotaDeleted(r.from)
		s.Unlock()
		if !r.kept {
			continue
		}
		state, err := m.core.EncodeState(nil, r.kind, r.obj)
		if err != nil {
			continue // restored from the same encoding: cannot fail
		}
		s = m.keys.LockKey(r.to)
		d.RecordChanged(r.to, r.kind, r.expireAt, state)
		s.Unlock()
	}
	m.moved = nil
}
