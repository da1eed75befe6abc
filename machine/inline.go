package machine

import (
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/window"
)

// Sliding-counter and fixed-window keys keep their state in their keyspace
// record (a few varint bytes, off the Go heap) instead of as a Go object:
// a million of them then cost what their bytes cost, not an object, an
// interface slot and the garbage collector's headroom for both. The bytes
// are the kinds' record encodings (window.CounterState.AppendRecord;
// quotas' quota.State.AppendRecord), shorter than the AppendBinary
// encodings snapshots, the quota journal and DEBUG DIGEST hold:
// AppendState and StoreState convert. The other inline kinds hold their
// AppendBinary encodings as they are.

// maxInlineWindow bounds the encodings: four uvarints.
const maxInlineWindow = 4 * 10

// inlineKind reports whether keys of kind keep their state inline.
// Quotas do too (machine/quota.go), their zone as its number in the
// compiled-in tz database, loaded through the machine's zone cache.
func inlineKind(kind keyspace.Kind) bool {
	return kind == keyspace.KindSlidingCounter || kind == keyspace.KindFixedWindow || kind == keyspace.KindQuota ||
		kind == keyspace.KindLeases || kind == keyspace.KindSlidingLog ||
		kind == keyspace.KindReservation || kind == keyspace.KindReservationPart || kind == keyspace.KindLease
}

// AppendState appends the encoding of e's state, as EncodeState writes
// it, whether the state is inline or an object. The caller holds the
// slot's lock.
func AppendState(dst []byte, s *keyspace.Slot, e keyspace.Entry) ([]byte, error) {
	if e.Inline() {
		switch e.Kind() {
		case keyspace.KindSlidingCounter:
			st, err := window.DecodeCounterRecord(s.State(e))
			if err != nil {
				return dst, err
			}
			return st.AppendBinary(dst), nil
		case keyspace.KindFixedWindow:
			st, err := window.DecodeFixedRecord(s.State(e))
			if err != nil {
				return dst, err
			}
			return st.AppendBinary(dst), nil
		case keyspace.KindQuota:
			return quota.RecordToBinary(dst, s.State(e))
		}
		return append(dst, s.State(e)...), nil
	}
	return EncodeState(dst, e.Kind(), s.Object(e))
}

// StoreState inserts key holding obj (a state DecodeState returned) the
// way the machine keeps its kind: inline or as the object. The caller
// holds the slot's lock.
func StoreState(s *keyspace.Slot, key []byte, kind keyspace.Kind, word int64, obj any) error {
	if !inlineKind(kind) {
		_, err := s.Insert(key, kind, word, obj)
		return err
	}
	state, err := EncodeState(nil, kind, obj) // also checks obj is kind's
	if err != nil {
		return err
	}
	switch st := obj.(type) {
	case *window.CounterState:
		state = st.AppendRecord(state[:0])
	case *window.FixedState:
		state = st.AppendRecord(state[:0])
	case *quota.State:
		if state, err = st.AppendRecord(state[:0]); err != nil {
			return err
		}
	}
	if len(state) > keyspace.MaxInlineState {
		// Only leases, sliding logs and reservations of many limits grow
		// past a record (they are objects then); the other inline kinds
		// are a few bytes.
		_, err = s.Insert(key, kind, word, obj)
		return err
	}
	_, err = s.InsertState(key, kind, word, state)
	return err
}

// windowStateOf reads a found window key's inline state.
func windowStateOf[S any](s *keyspace.Slot, e keyspace.Entry) (S, error) {
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

// storeInline writes a window key's state inline: in place when e (found)
// is an inline record, else as a new record. Entries of the slot other
// than e stay valid when e was found.
func storeInline[S any](s *keyspace.Slot, key []byte, kind keyspace.Kind, e keyspace.Entry, found bool, word int64, st *S) error {
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
