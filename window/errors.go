package window

import "errors"

// The errors every check may return. Their text is meant to be printed after
// "ERR " by the command layer, so each says plainly what was wrong.
var (
	// ErrLimit: the limit is zero or negative.
	ErrLimit = errors.New("window: limit must be positive")
	// ErrWindow: the window is zero or negative.
	ErrWindow = errors.New("window: window must be positive")
	// ErrWindowTooLong: the window exceeds MaxWindow (about 31.7 years),
	// beyond which the nanosecond arithmetic could overflow.
	ErrWindowTooLong = errors.New("window: window must be at most 1000000000 seconds")
	// ErrCost: the cost is negative.
	ErrCost = errors.New("window: cost must not be negative")
	// ErrLogLimit: an exact (log) check asked for a limit above MaxLogLimit,
	// which would let one key hold too many timestamps.
	ErrLogLimit = errors.New("window: limit must be at most 100000 for an exact window")
	// ErrTime: now lies outside [0, MaxTime] (1970 to 2116).
	ErrTime = errors.New("window: time is outside 1970..2116")
	// ErrCorrupt: a state does not decode, or a state handed to Check breaks
	// its invariants.
	ErrCorrupt = errors.New("window: corrupt state")
)
