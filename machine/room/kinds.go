package room

import (
	"time"

	"github.com/sluice-rl/sluice/keyspace"
)

// ZoneFunc loads a quota's time zone (a cache: restoring a million keys in
// one zone should parse it once).
type ZoneFunc func(string) (*time.Location, error)

// Kind is what one kind of record means, as the room that keeps it
// declares it: the name TYPE answers and SCAN TYPE matches, how its state
// is encoded in snapshots and digests, and how the core treats it.
type Kind struct {
	Kind keyspace.Kind
	// Name is TYPE's answer.
	Name string
	// Journaled kinds are written through to the quota store as they
	// change (Durability), not only snapshotted.
	Journaled bool
	// Internal kinds are sluice's own records, not users' keys.
	Internal bool
	// Kept kinds are configuration a flush puts back.
	Kept bool
	// Encode appends obj's encoding, or reports that obj is not this
	// kind's state.
	Encode func(dst []byte, obj any) ([]byte, bool)
	// Decode rebuilds what Encode encoded.
	Decode func(b []byte, zone ZoneFunc) (any, error)
	// Inline kinds keep their state in their keyspace record, not as an
	// object, unless it is longer than a record holds.
	Inline bool
	// ToRecord and ToBinary, for an inline kind whose record is not its
	// Encode's bytes, convert: obj to its record, a record to Encode's
	// bytes. nil: the record is Encode's bytes.
	ToRecord func(dst []byte, obj any) ([]byte, error)
	ToBinary func(dst, record []byte) ([]byte, error)
}

// Appender is a state that encodes itself.
type Appender interface{ AppendBinary([]byte) []byte }

// EncodeAs is the Encode of a kind whose state is a T.
func EncodeAs[T Appender](dst []byte, obj any) ([]byte, bool) {
	st, ok := obj.(T)
	if !ok {
		return dst, false
	}
	return st.AppendBinary(dst), true
}

// DecodeTo is the Decode of a kind whose decoder returns a pointer.
func DecodeTo[T any](decode func([]byte) (T, error)) func([]byte, ZoneFunc) (any, error) {
	return func(b []byte, _ ZoneFunc) (any, error) { return decode(b) }
}

// DecodeValue is the Decode of a kind whose decoder returns a value: the
// state is a pointer to it.
func DecodeValue[T any](decode func([]byte) (T, error)) func([]byte, ZoneFunc) (any, error) {
	return func(b []byte, _ ZoneFunc) (any, error) {
		st, err := decode(b)
		return &st, err
	}
}
