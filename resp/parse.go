package resp

import (
	"math"
	"strings"
)

// ParseInt parses a Redis integer argument: an optional '-' and decimal
// digits, nothing else, within int64.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// SecondsToNanos converts a count of seconds to nanoseconds, failing when
// the result does not fit in int64.
func SecondsToNanos(s int64) (int64, bool) {
	const nsPerSecond = 1_000_000_000
	if s > math.MaxInt64/nsPerSecond || s < math.MinInt64/nsPerSecond {
		return 0, false
	}
	return s * nsPerSecond, true
}

// EqualFold reports whether arg spells word (ASCII, any case).
func EqualFold(arg []byte, word string) bool {
	if len(arg) != len(word) {
		return false
	}
	for i := range len(arg) {
		c := arg[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		d := word[i]
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// Lower returns arg in lower case.
func Lower(arg []byte) string { return strings.ToLower(string(arg)) }
