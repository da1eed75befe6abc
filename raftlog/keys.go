package raftlog

import "encoding/binary"

// Keys of the database:
//
//	'l' | index (8 bytes, big-endian)  →  a log record (see codec.go)
//	's' | stable key                   →  the value as Set gave it
//
// Big-endian indexes sort in log order, so FirstIndex and LastIndex are the
// first and last keys of the 'l' range and DeleteRange is one range
// tombstone.
const (
	logPrefix    = 'l'
	stablePrefix = 's'
	logKeyLen    = 9
)

var (
	// logStart and logEnd bound every log key.
	logStart = []byte{logPrefix}
	logEnd   = []byte{logPrefix + 1}
)

// logKey returns the key of the entry at index.
func logKey(index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{logPrefix}, index)
}

// logIndex returns the index a log key names; ok is false for anything
// else.
func logIndex(k []byte) (index uint64, ok bool) {
	if len(k) != logKeyLen || k[0] != logPrefix {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// stableKey returns the database key of the stable key k.
func stableKey(k []byte) []byte {
	return append([]byte{stablePrefix}, k...)
}
