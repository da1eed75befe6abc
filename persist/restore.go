package persist

import (
	"fmt"
	"io"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/quota"
)

// LoadSnapshot reads a whole snapshot from r into ks, which should be
// empty, and returns its header: the keys live at the header's applied
// instant, as they were, at no other instant. The caller resumes its state
// machine from Header.Applied. A replica restoring a snapshot streamed to
// it (rather than the data directory's file, which Open restores together
// with the quota store) uses this.
func LoadSnapshot(r io.Reader, ks *keyspace.Keyspace) (Header, error) {
	sr, err := NewSnapshotReader(r)
	if err != nil {
		return Header{}, err
	}
	h := sr.Header()
	zones := zoneCache{}
	for {
		rec, ok := sr.Next()
		if !ok {
			break
		}
		if expired(rec.Word, h.Applied) {
			continue
		}
		err := restoreRecord(ks, rec.Key, rec.Word, func() (keyspace.Kind, any, error) {
			obj, err := machine.DecodeState(rec.Kind, rec.State, zones.load)
			return rec.Kind, obj, err
		})
		if err != nil {
			return h, fmt.Errorf("%w: record %d, key %q: %w", ErrCorruptSnapshot, sr.Records(), rec.Key, err)
		}
	}
	return h, sr.Err()
}

// Journal is the store as the state machine's Durability: quota changes,
// deletions and flushes journaled as they apply, with the tickets replies
// wait on.
func (s *Store) Journal() machine.Durability { return journalHook{s} }

type journalHook struct{ st *Store }

func (d journalHook) QuotaChanged(key []byte, q *quota.State) machine.Ticket {
	return machine.NewTicket(d.st, d.st.QuotaChanged(key, q))
}

func (d journalHook) RecordChanged(key []byte, kind keyspace.Kind, expireAt int64, state []byte) machine.Ticket {
	return machine.NewTicket(d.st, d.st.j.recordChanged(key, kind, expireAt, state))
}

func (d journalHook) QuotaDeleted(key []byte) machine.Ticket {
	return machine.NewTicket(d.st, d.st.QuotaDeleted(key))
}

func (d journalHook) Flushed() machine.Ticket { return machine.NewTicket(d.st, d.st.Flushed()) }
