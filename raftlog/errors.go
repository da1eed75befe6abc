package raftlog

import "errors"

// Errors returned by this package. GetLog reports a missing entry with
// raft.ErrLogNotFound itself, unwrapped, because raft compares it with ==.
var (
	// ErrOptions: an Options value that cannot work (see Options.Validate).
	ErrOptions = errors.New("raftlog: invalid options")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("raftlog: store is closed")
	// ErrCorrupt: a stored record does not decode (a log entry, or a
	// stable value read with GetUint64 that is not 8 bytes).
	ErrCorrupt = errors.New("raftlog: corrupt record")
	// ErrKeyNotFound: Get or GetUint64 of a key that was never set. Its
	// text is exactly "not found" and it is returned unwrapped: raft
	// recognises a fresh store by comparing err.Error() with "not found"
	// (as raft-boltdb and raft's InmemStore return it), and treats any
	// other error as fatal.
	ErrKeyNotFound = errors.New("not found")
)
