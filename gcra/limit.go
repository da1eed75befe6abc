package gcra

import (
	"math"
	"math/bits"
)

// Limit is the parameter set of one CL.THROTTLE call. It is not stored: every
// call brings its own, so changing it on an existing key simply reinterprets
// that key's TAT.
type Limit struct {
	// MaxBurst is how many units beyond the first may be taken at once (≥ 0).
	MaxBurst int64
	// Count is how many units the key admits per Period (≥ 1).
	Count int64
	// Period is the span Count is spread over, in nanoseconds (≥ 1); the
	// command layer converts CL.THROTTLE's seconds.
	Period int64
}

// Validate reports whether the limit can be run: it returns ErrNegativeLimit,
// ErrZeroRate, ErrRateTooHigh or ErrBurstTooLarge, or nil.
func (l Limit) Validate() error {
	_, _, _, err := l.derive()
	return err
}

// EmissionInterval is Period / Count truncated to whole nanoseconds: the
// spacing of the nominal schedule, and the cost of one unit. Only meaningful
// for a valid limit.
func (l Limit) EmissionInterval() int64 {
	if l.Count <= 0 {
		return 0
	}
	return l.Period / l.Count
}

// derive validates l and returns the emission interval, the limit
// (MaxBurst + 1) and the delay variation tolerance ei × limit.
func (l Limit) derive() (ei, limit, dvt int64, err error) {
	if l.MaxBurst < 0 || l.Count < 0 || l.Period < 0 {
		return 0, 0, 0, ErrNegativeLimit
	}
	if l.Count == 0 || l.Period == 0 {
		return 0, 0, 0, ErrZeroRate
	}
	ei = l.Period / l.Count
	if ei == 0 {
		return 0, 0, 0, ErrRateTooHigh
	}
	if l.MaxBurst == math.MaxInt64 {
		return 0, 0, 0, ErrBurstTooLarge
	}
	limit = l.MaxBurst + 1
	// A full-width product detects overflow without a second division on
	// this per-call path.
	hi, lo := bits.Mul64(uint64(ei), uint64(limit))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, 0, 0, ErrBurstTooLarge
	}
	return ei, limit, int64(lo), nil
}

// PolicyWindow is the window, in whole seconds, of the quota policy that
// describes l to a client (RateLimit-Policy: q=MaxBurst+1;w=PolicyWindow):
// all a key can hold — never less than the remaining it reports — per the
// time an empty key takes to refill it (the delay variation tolerance),
// rounded up, so the policy never promises more than the rate. 0 for a
// limit that does not validate.
func (l Limit) PolicyWindow() int64 {
	_, _, dvt, err := l.derive()
	if err != nil {
		return 0
	}
	w := dvt / 1e9
	if dvt%1e9 != 0 {
		w++
	}
	return max(w, 1)
}
