package quota

import "errors"

// Errors returned by this package. The command layer may print their text
// after "ERR ".
var (
	// ErrUnknownPeriod: a period name other than HOUR, DAY, WEEK, MONTH or
	// YEAR (any case), or a Period value outside that set.
	ErrUnknownPeriod = errors.New("quota: unknown period, want HOUR, DAY, WEEK, MONTH or YEAR")
	// ErrUnknownZone: the time zone name is not in the tz database (or is
	// "Local", which would depend on the machine).
	ErrUnknownZone = errors.New("quota: unknown time zone")
	// ErrNegative: a limit, cost, refund amount or anchor below zero.
	ErrNegative = errors.New("quota: value must not be negative")
	// ErrOutOfRange: an instant before 1970 or after MaxInstant, where
	// period bounds might not fit in int64 nanoseconds.
	ErrOutOfRange = errors.New("quota: instant out of supported range")
	// ErrNoZone: a Schedule that was not built by NewSchedule or
	// NewScheduleIn (its zone was never loaded).
	ErrNoZone = errors.New("quota: schedule has no loaded time zone")
	// ErrCorrupt: an encoded State that cannot be decoded.
	ErrCorrupt = errors.New("quota: corrupt state encoding")
)
