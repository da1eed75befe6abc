// Package limiter holds what every sluice limiter shares: the five-field
// result that CL.THROTTLE made the convention, and the rule that turns its
// nanosecond durations into the whole seconds clients see.
//
// Algorithms (gcra, window, conc, quota) compute in integer nanoseconds and
// return a Result; only the command layer converts it with Reply.
package limiter

// Result is the outcome of one limiter decision, in nanoseconds.
type Result struct {
	// Limited reports whether the request was refused.
	Limited bool
	// Limit is the most units the key admits (for GCRA: max_burst + 1).
	Limit int64
	// Remaining is how many units could still be admitted right now.
	Remaining int64
	// RetryAfter is how long until a request of the same cost would pass,
	// or -1 when the request was allowed or can never pass.
	RetryAfter int64
	// ResetAfter is how long until the key is back to its empty state.
	ResetAfter int64
}

// Never marks a RetryAfter that is not a duration: the request was allowed,
// or it asks for more than the limit and can never pass.
const Never = -1

// Reply is a Result in the wire form: [limited, limit, remaining,
// retry_after, reset_after], with durations in whole seconds.
func (r Result) Reply() [5]int64 {
	limited := int64(0)
	if r.Limited {
		limited = 1
	}
	retry := int64(-1)
	if r.RetryAfter != Never {
		retry = Seconds(r.RetryAfter)
	}
	return [5]int64{limited, r.Limit, r.Remaining, retry, Seconds(r.ResetAfter)}
}

const (
	nsPerSecond = int64(1_000_000_000)
	nsPerMilli  = int64(1_000_000)
)

// Seconds converts a non-negative duration in nanoseconds to whole seconds
// the way redis-cell does: truncate, then add one when the sub-second part
// is at least a millisecond (1.0005 s → 1, 1.9 s → 2, 2.000 s → 2).
// Negative durations are reported as 0.
func Seconds(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	s := ns / nsPerSecond
	if ns%nsPerSecond >= nsPerMilli {
		s++
	}
	return s
}
