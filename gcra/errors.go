package gcra

import "errors"

// Errors returned by Limit.Validate and Throttle. Messages are plain so the
// command layer can print them after "ERR ".
var (
	// ErrNegativeLimit: max_burst, count or period is below zero.
	ErrNegativeLimit = errors.New("gcra: max_burst, count and period must not be negative")
	// ErrZeroRate: count or period is zero, so there is no emission interval.
	ErrZeroRate = errors.New("gcra: zero rates are not supported")
	// ErrRateTooHigh: period / count is under one nanosecond, the finest
	// emission interval that integer nanoseconds can express.
	ErrRateTooHigh = errors.New("gcra: rate too high: period / count is less than 1 ns")
	// ErrBurstTooLarge: (max_burst + 1) × emission interval overflows int64
	// nanoseconds.
	ErrBurstTooLarge = errors.New("gcra: max_burst too large: burst window overflows int64 nanoseconds")
	// ErrNegativeQuantity: quantity is below zero.
	ErrNegativeQuantity = errors.New("gcra: quantity must not be negative")
	// ErrNegativeNow: now is before the unix epoch; the TAT arithmetic relies
	// on now ≥ 0 to stay inside int64.
	ErrNegativeNow = errors.New("gcra: now is before the unix epoch")
	// ErrTimeOverflow: the new theoretical arrival time would pass the int64
	// nanosecond range (year 2262), so it cannot be stored.
	ErrTimeOverflow = errors.New("gcra: theoretical arrival time overflows int64 nanoseconds")
)
