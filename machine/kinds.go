package machine

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
)

// What each keyspace kind means — the name TYPE answers and SCAN TYPE
// matches, and how its state is encoded in snapshots and digests — is
// declared by the room that keeps records of it (kindRow), and gathered
// into one table by the assembly (rooms.go). A new kind adds a
// keyspace.Kind number and a row in its room.

// ErrUnencodable is a state whose type does not match its key's kind.
var ErrUnencodable = errors.New("machine: state does not match its kind")

// kindRow is what one kind of record means (room.Kind).
type kindRow = room.Kind

// kindTable is every room's kinds by number; it is built once, at
// package initialization, and never changed.
type kindTable [keyspace.MaxKinds]kindRow

// newKindTable gathers rows; two rows of one kind are a bug in the
// assembly.
func newKindTable(rooms ...[]kindRow) *kindTable {
	var t kindTable
	for _, rows := range rooms {
		for _, r := range rows {
			if t[r.Kind].Name != "" {
				panic(fmt.Sprintf("machine: kind %d declared twice", r.Kind))
			}
			t[r.Kind] = r
		}
	}
	return &t
}

// row is kind's row, nil for an unknown kind.
func (t *kindTable) row(kind keyspace.Kind) *kindRow {
	if int(kind) >= len(t) || t[kind].Name == "" {
		return nil
	}
	return &t[kind]
}

// KindName is the name TYPE answers for a key of kind k.
func KindName(k keyspace.Kind) string {
	if r := kinds.row(k); r != nil {
		return r.Name
	}
	return "none"
}

// KindNamed is the kind TYPE calls name, for SCAN TYPE.
func KindNamed(name string) (keyspace.Kind, bool) {
	for k := range kinds {
		if k != int(keyspace.KindNone) && kinds[k].Name == name {
			return keyspace.Kind(k), true
		}
	}
	return keyspace.KindNone, false
}

// EncodeState appends the encoding of obj, the state of a key of kind.
// GCRA keys keep their whole state in the word: their encoding is empty.
func EncodeState(dst []byte, kind keyspace.Kind, obj any) ([]byte, error) {
	if r := kinds.row(kind); r != nil && r.Encode != nil {
		if out, ok := r.Encode(dst, obj); ok {
			return out, nil
		}
	}
	return dst, fmt.Errorf("%w: kind %s, state %T", ErrUnencodable, KindName(kind), obj)
}

// Journaled reports whether changes to keys of kind are written through to
// the quota store as they happen (Durability), not only snapshotted.
func Journaled(kind keyspace.Kind) bool {
	r := kinds.row(kind)
	return r != nil && r.Journaled
}

// AppendState appends the encoding of e's state, as EncodeState writes
// it, whether the state is inline or an object. The caller holds the
// slot's lock.
func AppendState(dst []byte, s *keyspace.Slot, e keyspace.Entry) ([]byte, error) {
	if !e.Inline() {
		return EncodeState(dst, e.Kind(), s.Object(e))
	}
	if r := kinds.row(e.Kind()); r != nil && r.ToBinary != nil {
		return r.ToBinary(dst, s.State(e))
	}
	return append(dst, s.State(e)...), nil
}

// StoreState inserts key holding obj (a state DecodeState returned) the
// way the machine keeps its Kind: inline or as the object. The caller
// holds the slot's lock.
func StoreState(s *keyspace.Slot, key []byte, kind keyspace.Kind, word int64, obj any) error {
	r := kinds.row(kind)
	if r == nil || !r.Inline {
		_, err := s.Insert(key, kind, word, obj)
		return err
	}
	state, err := EncodeState(nil, kind, obj) // also checks obj is kind's
	if err != nil {
		return err
	}
	if r.ToRecord != nil {
		if state, err = r.ToRecord(state[:0], obj); err != nil {
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

// DecodeState rebuilds the object EncodeState encoded. zone loads quota
// time zones (a cache: restoring a million keys in one zone should parse it
// once).
func DecodeState(kind keyspace.Kind, b []byte, zone func(string) (*time.Location, error)) (any, error) {
	if r := kinds.row(kind); r != nil && r.Decode != nil {
		return r.Decode(b, zone)
	}
	return nil, fmt.Errorf("unknown kind %d", kind)
}
