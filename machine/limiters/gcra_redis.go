package limiters

import (
	"math"
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/gcra"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
)

// GCRA: Redis 8.8's rate-limit command, on the same state as CL.THROTTLE
// (a key's TAT), answering as Redis does: its arguments read and refused
// in Redis' order with Redis' errors, its arithmetic package gcra's
// Redis.
func redisGCRACommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "gcra", Arity: -5, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "rate_limit", Since: "1.6.0", Complexity: "O(1)",
			Summary: "Rate limit via GCRA (Generic Cell Rate Algorithm), as Redis 8.8: replies [limited, max_burst+1, available, retry_after, full_burst_after].",
			Args: []cmdspec.Arg{
				{Name: "key", Type: "key"},
				{Name: "max-burst", Type: "integer"},
				{Name: "tokens-per-period", Type: "integer"},
				{Name: "period", Type: "double"},
				{Name: "count", Type: "integer", Token: "TOKENS", Optional: true},
			}}, Decides: true, Run: runRedisGCRA, Check: checkRedisGCRA,
	}}
}

// redisRangeError is Redis' reply to an integer outside [1, LONG_MAX].
const redisRangeError = "ERR value is out of range, value must between 1 and 9223372036854775807"

// parseRedisGCRA reads <key> <max-burst> <tokens-per-period> <period>
// [TOKENS <count>] as Redis does, refusing in its order.
func parseRedisGCRA(args [][]byte) (gcra.RedisLimit, string) {
	var l gcra.RedisLimit
	if len(args) > 7 {
		return l, resp.ErrArity("gcra")
	}
	burst, ok := resp.ParseInt(args[2])
	switch {
	case !ok:
		return l, resp.ErrNotInteger
	case burst < 0:
		return l, "ERR value is out of range, must be positive"
	}
	l.Burst = burst
	if burst < math.MaxInt64 {
		l.Burst++
	}
	perPeriod, bad := parseRedisCount(args[3])
	if bad != "" {
		return l, bad
	}
	period, ok := parseRedisDouble(args[4])
	switch {
	case !ok:
		return l, "ERR value is not a valid float"
	case !(period > 0 && period < 1e12):
		return l, "ERR period must be > 0 and < 1e12"
	}
	l.Tokens = 1
	if len(args) >= 6 {
		if !resp.EqualFold(args[5], "tokens") {
			return l, resp.ErrSyntax
		}
		if len(args) == 6 {
			return l, "ERR Missing TOKENS value"
		}
		if l.Tokens, bad = parseRedisCount(args[6]); bad != "" {
			return l, bad
		}
	}
	l.Interval = gcra.RedisInterval(period, perPeriod)
	return l, ""
}

// parseRedisCount reads an integer in [1, LONG_MAX] as Redis'
// getRangeLongFromObjectOrReply does, with its errors.
func parseRedisCount(b []byte) (int64, string) {
	n, ok := resp.ParseInt(b)
	switch {
	case !ok:
		return 0, resp.ErrNotInteger
	case n < 1:
		return 0, redisRangeError
	}
	return n, ""
}

// parseRedisDouble reads a double as Redis' getDoubleFromObject does:
// strtod's forms, no space around, not NaN.
func parseRedisDouble(b []byte) (float64, bool) {
	if len(b) == 0 || b[0] == ' ' || b[len(b)-1] == ' ' {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil && v == 0 || v != v {
		return 0, false // not a number (an overflow to ±Inf is strtod's ERANGE: taken, then refused as a period)
	}
	return v, true
}

func checkRedisGCRA(args [][]byte) string {
	_, bad := parseRedisGCRA(args)
	return bad
}

// runRedisGCRA is GCRA <key> <max-burst> <tokens-per-period> <period>
// [TOKENS <count>].
func runRedisGCRA(x Exec, args [][]byte) {
	l, bad := parseRedisGCRA(args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	if !x.At(1) {
		// A member of 0.4.0 beside this one does not know the command:
		// refused alike until every member applies level 1.
		x.Fail("ERR GCRA needs every member of the group at sluice 0.5.0 or later (apply level 1); try again once the group is upgraded")
		return
	}
	var r gcra.RedisResult
	err := withTAT(x, args[1], func(tat int64, found bool, now int64) (newTAT int64, store bool, err error) {
		newTAT, store, r, err = gcra.Redis(tat, found, now, l)
		return newTAT, store, err
	})
	if err != nil {
		x.Error(err)
		return
	}
	limited := int64(0)
	if r.Limited {
		limited = 1
	}
	x.LimiterReply(r.Limited, [5]int64{limited, r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter})
}
