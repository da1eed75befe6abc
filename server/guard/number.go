package guard

import "math"

// maxNumLen is the longest text Redis' string2ll accepts (LONG_STR_SIZE-1):
// "-9223372036854775808" has 20 bytes.
const maxNumLen = 20

// parseNumber reads a header length exactly as Redis' string2ll does, so the
// guard accepts the same headers Redis does: an optional '-', then either a
// lone "0" or a digit 1-9 followed by digits, fitting in an int64. Empty
// text, "+1", "01", "-0", spaces and overflow are all refused.
func parseNumber(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > maxNumLen {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	i := 0
	if neg {
		i = 1
		if len(b) == 1 {
			return 0, false
		}
	}
	if b[i] < '1' || b[i] > '9' {
		return 0, false
	}
	v := uint64(b[i] - '0')
	for i++; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > math.MaxUint64/10 {
			return 0, false
		}
		v *= 10
		d := uint64(c - '0')
		if v > math.MaxUint64-d {
			return 0, false
		}
		v += d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return int64(-v), true // -(1<<63) wraps to math.MinInt64, as wanted
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}
