package gcra

import (
	"errors"
	"math"
)

// Redis 8.8's GCRA command (src/t_gcra.c) on the same state as CL.THROTTLE:
// a theoretical arrival time. Redis keeps it in microseconds and reads its
// clock in milliseconds; this follows that arithmetic step for step, so a
// reply is the one Redis would give at the same instant, and keeps the TAT
// in nanoseconds (a multiple of 1000) as CL.THROTTLE does.

// RedisLimit is one GCRA call's parameters, as Redis derives them.
type RedisLimit struct {
	// Burst is max_burst + 1 (max_burst at the largest int64 stays).
	Burst int64
	// Interval is the emission interval in microseconds (≥ 1).
	Interval int64
	// Tokens is what the call takes (TOKENS, default 1; ≥ 1).
	Tokens int64
}

// RedisResult is GCRA's reply: limited, max_burst + 1, the tokens free now,
// the seconds to retry after (-1: not limited, or never: more tokens than
// a burst holds), and the seconds until a full burst is free.
type RedisResult struct {
	Limited                                  bool
	Limit, Remaining, RetryAfter, ResetAfter int64
}

// Errors of a GCRA call whose arithmetic would overflow, as Redis names
// them.
var (
	// ErrRedisTokensOverflow: the interval × tokens, or the new TAT, passes
	// int64.
	ErrRedisTokensOverflow = errors.New("GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow")
	// ErrRedisBurstOverflow: the interval × (max_burst + 1) passes int64.
	ErrRedisBurstOverflow = errors.New("GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and max_burst would cause an overflow")
)

// RedisInterval is the emission interval, in microseconds, of
// tokensPerPeriod over period seconds, computed as Redis computes it: in
// IEEE doubles, rounded half up, at least 1. The explicit conversions keep
// each step rounded (no fused multiply-add), so every member computes the
// same; period is in (0, 1e12) and tokensPerPeriod ≥ 1.
func RedisInterval(period float64, tokensPerPeriod int64) int64 {
	us := float64(period * 1e6)
	ei := int64(float64(us/float64(tokensPerPeriod)) + 0.5)
	return max(ei, 1)
}

// Redis decides a GCRA call at now (ns) on the TAT tat (ns; found false:
// none), and returns the TAT to keep (store: only when it is allowed).
func Redis(tat int64, found bool, now int64, l RedisLimit) (newTAT int64, store bool, r RedisResult, err error) {
	if l.Interval > math.MaxInt64/l.Tokens {
		return 0, false, r, ErrRedisTokensOverflow
	}
	if l.Interval > math.MaxInt64/l.Burst {
		return 0, false, r, ErrRedisBurstOverflow
	}
	nowUs := now / 1_000_000 * 1000 // Redis' clock: milliseconds
	tatUs := nowUs
	if found {
		tatUs = tat / 1000
	}
	variance := l.Interval * l.Burst
	increment := l.Interval * l.Tokens
	base := max(nowUs, tatUs)
	if math.MaxInt64/1000-base < increment {
		// Redis bounds the TAT in µs; kept in ns it must be 1000 times
		// smaller.
		return 0, false, r, ErrRedisTokensOverflow
	}
	next := base + increment
	diff := nowUs - (next - variance)
	r = RedisResult{Limit: l.Burst, RetryAfter: -1}
	var ttl int64
	if diff < 0 {
		r.Limited = true
		if increment <= variance {
			r.RetryAfter = ceilSeconds(-diff)
		}
		ttl = tatUs - nowUs
	} else {
		ttl = next - nowUs
		newTAT, store = next*1000, true
	}
	if left := variance - ttl; left > -l.Interval {
		r.Remaining = left / l.Interval
	}
	r.ResetAfter = ceilSeconds(ttl)
	return newTAT, store, r, nil
}

// ceilSeconds is us in whole seconds, rounded up (C's ceil of a double,
// for negative us too: toward zero).
func ceilSeconds(us int64) int64 {
	s := us / 1_000_000
	if us%1_000_000 != 0 && us > 0 {
		s++
	}
	return s
}
