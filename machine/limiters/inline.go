package limiters

import (
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/window"
)

// Sliding-counter and fixed-window keys keep their state in their keyspace
// record (a few varint bytes, off the Go heap) instead of as a Go object:
// a million of them then cost what their bytes cost, not an object, an
// interface slot and the garbage collector's headroom for both. The bytes
// are the kinds' record encodings (window.CounterState.AppendRecord;
// quotas' quota.State.AppendRecord), shorter than the AppendBinary
// encodings snapshots, the quota journal and DEBUG DIGEST hold:
// AppendState and StoreState convert (Kinds declares the
// conversions). The other inline kinds hold their AppendBinary encodings
// as they are.

// maxInlineWindow bounds the encodings: four uvarints.
const maxInlineWindow = 4 * 10

// WindowStateOf reads a found window key's inline state.
func WindowStateOf[S any](s *keyspace.Slot, e keyspace.Entry) (S, error) {
	var st S
	if !e.Inline() {
		return st, window.ErrCorrupt
	}
	var err error
	switch p := any(&st).(type) {
	case *window.CounterState:
		*p, err = window.DecodeCounterRecord(s.State(e))
	case *window.FixedState:
		*p, err = window.DecodeFixedRecord(s.State(e))
	default:
		err = window.ErrCorrupt
	}
	return st, err
}

// StoreInline writes a window key's state inline: in place when e (found)
// is an inline record, else as a new record. Entries of the slot other
// than e stay valid when e was found.
func StoreInline[S any](s *keyspace.Slot, key []byte, kind keyspace.Kind, e keyspace.Entry, found bool, word int64, st *S) error {
	var buf [maxInlineWindow]byte
	var enc []byte
	switch p := any(st).(type) {
	case *window.CounterState:
		enc = p.AppendRecord(buf[:0])
	case *window.FixedState:
		enc = p.AppendRecord(buf[:0])
	default:
		return window.ErrCorrupt
	}
	if found {
		if !e.Inline() {
			return window.ErrCorrupt
		}
		e, err := s.SetState(e, enc)
		if err != nil {
			return err
		}
		s.SetWord(e, word)
		return nil
	}
	_, err := s.InsertState(key, kind, word, enc)
	return err
}
