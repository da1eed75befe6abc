package guard

import (
	"fmt"
	"math"
)

// Defaults, as Redis 7 has them except DefaultMaxArgs, which Redis leaves at
// INT_MAX and sluice lowers because no command of its takes more than a few
// arguments.
const (
	// DefaultMaxArgs is the default Limits.MaxArgs.
	DefaultMaxArgs = 1024 * 1024
	// DefaultMaxBulkLen is the default Limits.MaxBulkLen: Redis'
	// proto-max-bulk-len, 512 MiB.
	DefaultMaxBulkLen = 512 * 1024 * 1024
	// DefaultMaxInlineLen is the default Limits.MaxInlineLen: Redis'
	// PROTO_INLINE_MAX_SIZE, 64 KiB.
	DefaultMaxInlineLen = 64 * 1024
	// DefaultUnauthMaxArgs is the default Limits.UnauthMaxArgs (Redis: 10).
	DefaultUnauthMaxArgs = 10
	// DefaultUnauthMaxBulkLen is the default Limits.UnauthMaxBulkLen (Redis: 16384).
	DefaultUnauthMaxBulkLen = 16384
)

// Ranges Validate enforces.
const (
	// MaxArgsCeiling is Redis' own cap on a multibulk length (INT_MAX); it
	// also keeps redcon's int arithmetic on argument counts from overflowing.
	MaxArgsCeiling = math.MaxInt32
	// MaxBulkLenCeiling keeps redcon's bounds arithmetic (offset + length
	// + 2) far from overflow.
	MaxBulkLenCeiling = math.MaxInt32
	// MinMaxInlineLen leaves room for any valid "*<n>" or "$<n>" line
	// (at most 21 bytes before "\r\n").
	MinMaxInlineLen = 64
	// MaxInlineLenCeiling bounds the one line a connection may buffer.
	MaxInlineLenCeiling = 16 * 1024 * 1024
	// MinUnauthMaxArgs lets "AUTH username password" through.
	MinUnauthMaxArgs = 3
)

// Limits bound what one request may declare. A request beyond a limit is a
// protocol violation; the connection gets the matching error and is closed.
type Limits struct {
	// MaxArgs is the largest multibulk length ("*<n>") accepted, i.e. the
	// most arguments one request may carry, and also the most words of an
	// inline request. A larger header is refused before any argument is
	// read and without allocating. In [1, MaxArgsCeiling].
	MaxArgs int64
	// MaxBulkLen is the largest bulk length ("$<n>") accepted, in bytes:
	// Redis' proto-max-bulk-len. In [1, MaxBulkLenCeiling].
	MaxBulkLen int64
	// MaxInlineLen is the longest inline request line and the longest
	// "*<n>" or "$<n>" header line, in bytes without the final "\n" (Redis
	// uses one constant, PROTO_INLINE_MAX_SIZE, for both). An inline line
	// is buffered whole, so this is also the most a connection buffers.
	// In [MinMaxInlineLen, MaxInlineLenCeiling].
	MaxInlineLen int
	// UnauthMaxArgs replaces MaxArgs until the connection authenticates
	// (only when the server requires a password). In
	// [MinUnauthMaxArgs, MaxArgs].
	UnauthMaxArgs int64
	// UnauthMaxBulkLen replaces MaxBulkLen until the connection
	// authenticates. In [1, MaxBulkLen].
	UnauthMaxBulkLen int64
}

// DefaultLimits returns Redis' limits (with MaxArgs at DefaultMaxArgs).
func DefaultLimits() Limits {
	return Limits{
		MaxArgs:          DefaultMaxArgs,
		MaxBulkLen:       DefaultMaxBulkLen,
		MaxInlineLen:     DefaultMaxInlineLen,
		UnauthMaxArgs:    DefaultUnauthMaxArgs,
		UnauthMaxBulkLen: DefaultUnauthMaxBulkLen,
	}
}

// Validate reports the first field outside its range, wrapping ErrInvalidLimits.
func (l Limits) Validate() error {
	switch {
	case l.MaxArgs < 1 || l.MaxArgs > MaxArgsCeiling:
		return fmt.Errorf("%w: MaxArgs %d not in [1, %d]", ErrInvalidLimits, l.MaxArgs, int64(MaxArgsCeiling))
	case l.MaxBulkLen < 1 || l.MaxBulkLen > MaxBulkLenCeiling:
		return fmt.Errorf("%w: MaxBulkLen %d not in [1, %d]", ErrInvalidLimits, l.MaxBulkLen, int64(MaxBulkLenCeiling))
	case l.MaxInlineLen < MinMaxInlineLen || l.MaxInlineLen > MaxInlineLenCeiling:
		return fmt.Errorf("%w: MaxInlineLen %d not in [%d, %d]", ErrInvalidLimits, l.MaxInlineLen, MinMaxInlineLen, MaxInlineLenCeiling)
	case l.UnauthMaxArgs < MinUnauthMaxArgs || l.UnauthMaxArgs > l.MaxArgs:
		return fmt.Errorf("%w: UnauthMaxArgs %d not in [%d, MaxArgs=%d]", ErrInvalidLimits, l.UnauthMaxArgs, MinUnauthMaxArgs, l.MaxArgs)
	case l.UnauthMaxBulkLen < 1 || l.UnauthMaxBulkLen > l.MaxBulkLen:
		return fmt.Errorf("%w: UnauthMaxBulkLen %d not in [1, MaxBulkLen=%d]", ErrInvalidLimits, l.UnauthMaxBulkLen, l.MaxBulkLen)
	}
	return nil
}
