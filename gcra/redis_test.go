package gcra

import (
	"math"
	"math/rand/v2"
	"testing"
)

// redisReference is Redis 8.8's gcraCommand arithmetic as its C reads:
// microseconds, a millisecond clock, doubles for the rounding up. Redis
// runs it on a TAT in µs; the state here is in ns.
func redisReference(tatUs int64, found bool, nowMs int64, l RedisLimit) (newTatUs int64, store bool, r RedisResult) {
	now := nowMs * 1000
	if !found {
		tatUs = now
	}
	variance := l.Interval * l.Burst
	increment := l.Interval * l.Tokens
	base := max(now, tatUs)
	newTat := base + increment
	diff := now - (newTat - variance)
	r = RedisResult{Limit: l.Burst, RetryAfter: -1}
	var ttl int64
	if diff < 0 {
		r.Limited = true
		if increment <= variance {
			r.RetryAfter = int64(math.Ceil(float64(-diff) / 1000000.))
		}
		ttl = tatUs - now
	} else {
		ttl = newTat - now
		newTatUs, store = newTat, true
	}
	if next := variance - ttl; next > -l.Interval {
		r.Remaining = next / l.Interval
	}
	r.ResetAfter = int64(math.Ceil(float64(ttl) / 1000000.))
	return newTatUs, store, r
}

// The integer GCRA answers as Redis' C does, on random limits and traces
// of calls at random instants (on this state: the TAT kept in ns, read
// back as µs).
func TestRedisMatchesItsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(88, 1))
	for range 2000 {
		l := RedisLimit{Burst: r.Int64N(20) + 1, Tokens: 1}
		period := float64(r.IntN(120)+1) / float64(r.IntN(4)+1)
		l.Interval = RedisInterval(period, r.Int64N(50)+1)
		now := int64(1_800_000_000_123_456_789)
		var tat, refTat int64
		found := false
		for range 30 {
			now += r.Int64N(3 * l.Interval * 1000)
			l.Tokens = r.Int64N(l.Burst+2) + 1
			// The key expires at its TAT.
			if found && tat <= now {
				found = false
			}
			got, store, res, err := Redis(tat, found, now, l)
			if err != nil {
				t.Fatal(err)
			}
			wantTat, wantStore, want := redisReference(refTat, found, now/1_000_000, l)
			if res != want || store != wantStore || store && got != wantTat*1000 {
				t.Fatalf("%+v at %d (TAT %d, found %v): %+v (store %v, %d), Redis %+v (store %v, %d µs)", l, now, tat, found, res, store, got, want, wantStore, wantTat)
			}
			if store {
				tat, refTat, found = got, wantTat, true
			}
		}
	}
}

// The emission interval is Redis': µs, rounded half up, at least 1.
func TestRedisInterval(t *testing.T) {
	for _, c := range []struct {
		period float64
		tokens int64
		want   int64
	}{{1, 5, 200000}, {0.5, 3, 166667}, {1, 3, 333333}, {2, 3, 666667}, {1e-7, 1, 1}, {60, 100, 600000}} {
		if got := RedisInterval(c.period, c.tokens); got != c.want {
			t.Errorf("RedisInterval(%v, %d) = %d, want %d", c.period, c.tokens, got, c.want)
		}
	}
}
