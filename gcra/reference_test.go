package gcra

import (
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/sluice-rl/sluice/limiter"
)

// bruteBucket is a leaky bucket simulated one nanosecond at a time, written
// without TATs: it holds a level in nanoseconds of work and leaks one unit per
// nanosecond. A request of cost ei × q fits iff level + cost ≤ ei × limit.
// Every answer is found by counting, not by formula, so it shares no
// arithmetic with Throttle.
type bruteBucket struct {
	level int64
	at    int64
}

func (b *bruteBucket) leakUntil(now int64) {
	for ; b.at < now; b.at++ {
		if b.level > 0 {
			b.level--
		}
	}
}

func (b *bruteBucket) decide(now int64, l Limit, q int64) limiter.Result {
	b.leakUntil(now)
	ei := l.Period / l.Count
	limit := l.MaxBurst + 1
	capacity := int64(0)
	for range limit {
		capacity += ei
	}
	cost := int64(0)
	for range q {
		cost += ei
	}
	r := limiter.Result{Limit: limit, RetryAfter: limiter.Never}
	if b.level+cost <= capacity {
		b.level += cost
	} else {
		r.Limited = true
		if cost <= capacity {
			// Wait nanosecond by nanosecond until it would fit.
			wait, level := int64(0), b.level
			for level+cost > capacity {
				level--
				wait++
			}
			r.RetryAfter = wait
		}
	}
	for level := b.level; level > 0; level-- {
		r.ResetAfter++
	}
	for level := b.level + ei; level <= capacity; level += ei {
		r.Remaining++
	}
	return r
}

// randomSmallLimit picks limits small enough for nanosecond stepping,
// including some whose Period / Count truncates.
func randomSmallLimit(rng *rand.Rand) Limit {
	for {
		l := Limit{MaxBurst: rng.Int64N(5), Count: 1 + rng.Int64N(4), Period: 1 + rng.Int64N(40)}
		if l.Period >= l.Count {
			return l
		}
	}
}

func TestAgainstBruteForceBucket(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		l := randomSmallLimit(rng)
		start := int64(1_000_000)
		now := start
		var k key
		ref := bruteBucket{at: now}
		for step := range 300 {
			if rng.IntN(20) == 0 {
				l = randomSmallLimit(rng) // parameters change on a live key
			}
			ei := l.Period / l.Count
			switch rng.IntN(4) {
			case 0: // same instant
			case 1:
				now += rng.Int64N(ei + 1)
			default:
				now += rng.Int64N(3 * ei * (l.MaxBurst + 1))
			}
			q := int64(1)
			switch rng.IntN(6) {
			case 0:
				q = 0
			case 1:
				q = rng.Int64N(l.MaxBurst + 3)
			}
			want := ref.decide(now, l, q)
			got := k.throttle(t, now, l, q)
			if got != want {
				t.Fatalf("seed %d step %d now +%d %+v q=%d:\n got  %+v\n want %+v",
					seed, step, now-start, l, q, got, want)
			}
		}
	}
}

// levelBucket is the same leaky bucket in closed form (level drained by
// elapsed time), to check Throttle at realistic clocks and rates where
// nanosecond stepping is too slow.
type levelBucket struct {
	level int64
	at    int64
}

func (b *levelBucket) decide(now int64, l Limit, q int64) limiter.Result {
	b.level = max(0, b.level-(now-b.at))
	b.at = now
	ei := l.Period / l.Count
	limit := l.MaxBurst + 1
	capacity := ei * limit
	r := limiter.Result{Limit: limit, RetryAfter: limiter.Never}
	// In 128-bit-safe big integers: ei × q may be far beyond int64.
	need := new(big.Int).Mul(big.NewInt(ei), big.NewInt(q))
	need.Add(need, big.NewInt(b.level))
	over := need.Sub(need, big.NewInt(capacity))
	if over.Sign() <= 0 {
		b.level += ei * q
	} else {
		r.Limited = true
		if q <= limit {
			r.RetryAfter = over.Int64()
		}
	}
	r.ResetAfter = b.level
	r.Remaining = max(0, capacity-b.level) / ei
	return r
}

func randomRealisticLimit(rng *rand.Rand) Limit {
	periods := []int64{1 * sec, 60 * sec, 3600 * sec, 86400 * sec, 7 * sec, 1500 * ms, 999_999}
	counts := []int64{1, 3, 30, 1000, 666_667, 1_000_000, 1_000_000_000}
	for {
		l := Limit{
			MaxBurst: rng.Int64N(1 + []int64{0, 10, 1000, 1_000_000}[rng.IntN(4)]),
			Count:    counts[rng.IntN(len(counts))],
			Period:   periods[rng.IntN(len(periods))],
		}
		// Keep the burst window under ~36 years so the TAT stays in int64.
		if l.Validate() == nil && l.Period/l.Count <= (1<<60)/(l.MaxBurst+1) {
			return l
		}
	}
}

func TestAgainstLevelBucketRealistic(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0xb1c))
		l := randomRealisticLimit(rng)
		now := t0 + rng.Int64N(sec)
		var k key
		ref := levelBucket{at: now}
		for step := range 500 {
			if rng.IntN(50) == 0 {
				l = randomRealisticLimit(rng)
			}
			ei := l.Period / l.Count
			if rng.IntN(3) > 0 {
				now += rng.Int64N(2*ei + 1)
			}
			q := int64(1)
			switch rng.IntN(8) {
			case 0:
				q = 0
			case 1:
				q = rng.Int64N(l.MaxBurst + 3)
			case 2:
				q = rng.Int64N(1 << 62)
			}
			want := ref.decide(now, l, q)
			got := k.throttle(t, now, l, q)
			if got != want {
				t.Fatalf("seed %d step %d %+v q=%d:\n got  %+v\n want %+v", seed, step, l, q, got, want)
			}
		}
	}
}
