package conc

import "errors"

const (
	// MaxLimit is the largest limit a key may have. It bounds the leases a
	// key can hold, and so the memory and the cost of every operation on it.
	MaxLimit = 10_000
	// MaxRequestIDLen is the longest request id accepted, in bytes. Ids are
	// stored per lease, so this bounds a key's memory together with MaxLimit.
	MaxRequestIDLen = 256
)

// Errors returned by this package. The messages are plain enough for the
// command layer to print after "ERR ".
var (
	// ErrLimitNotPositive: the limit is zero or negative.
	ErrLimitNotPositive = errors.New("conc: limit must be positive")
	// ErrLimitTooLarge: the limit is above MaxLimit.
	ErrLimitTooLarge = errors.New("conc: limit is above 10000")
	// ErrLeaseNotPositive: the lease duration is zero or negative.
	ErrLeaseNotPositive = errors.New("conc: lease must be positive")
	// ErrRequestIDTooLong: the request id is longer than MaxRequestIDLen.
	ErrRequestIDTooLong = errors.New("conc: request id is longer than 256 bytes")
	// ErrOverflow: now plus the lease duration does not fit in int64
	// nanoseconds.
	ErrOverflow = errors.New("conc: lease expiry overflows")
	// ErrCorrupt: encoded lease state could not be decoded.
	ErrCorrupt = errors.New("conc: corrupt lease state")
)
