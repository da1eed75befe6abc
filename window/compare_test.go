package window

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestCounterVersusLog measures the sliding window counter against the exact
// log on seeded random traces (unit costs, 100 per 60 s) and asserts the
// counter's documented overshoot bound: fewer than Limit·(1 + d/Window)
// units in any interval of length d ≤ Window. The error rates are reported,
// not asserted: doc.go promises no rate, only the bound, and the rates
// depend on the traffic (they are highest when it hovers at the limit).
//
// Wrong decisions are counted three ways:
//   - independent: the counter and the log each limit their own copy of the
//     trace; a step counts when their decisions differ. Histories diverge,
//     so one early difference can cause more.
//   - shadow: the counter limits the trace; at each step the exact rule is
//     applied to the counter's own admitted history (wrongly allowed:
//     counter yes, exact no; wrongly refused: the reverse).
//   - all-requests: Cloudflare's method, where refused requests count too;
//     the counter's estimate and the exact count of every request in the
//     window are compared against the limit. Not what this package does,
//     but the setting of the 0.003% figure the design notes quote.
func TestCounterVersusLog(t *testing.T) {
	p := Params{Limit: 100, Window: 60 * nsPerSecond}
	durations := []int64{2 * nsPerSecond, p.Window / 4, p.Window}
	seeds, steps := uint64(10), 20_000
	if testing.Short() {
		seeds, steps = 2, 5_000
	}
	perUnit := p.Window / p.Limit
	scenarios := []struct {
		name string
		gap  func(*rand.Rand) int64
	}{
		// steady at rate r: gaps uniform in [1, 2·perUnit/r]
		{"steady 0.5×", func(r *rand.Rand) int64 { return 1 + r.Int64N(4*perUnit) }},
		{"steady 0.9×", func(r *rand.Rand) int64 { return 1 + r.Int64N(perUnit*20/9) }},
		{"steady 1.1×", func(r *rand.Rand) int64 { return 1 + r.Int64N(perUnit*20/11) }},
		{"steady 2×", func(r *rand.Rand) int64 { return 1 + r.Int64N(perUnit) }},
		{"steady 5×", func(r *rand.Rand) int64 { return 1 + r.Int64N(perUnit*2/5) }},
		// bursts of ~20 within milliseconds, quiet gaps of up to 2 windows
		{"bursty", func(r *rand.Rand) int64 {
			if r.IntN(20) == 0 {
				return r.Int64N(2 * p.Window)
			}
			return r.Int64N(nsPerSecond / 1000)
		}},
	}
	for _, sc := range scenarios {
		var requests, disagree, wrongAllow, wrongRefuse, allWrong, counterAdmits, logAdmits int
		worst := make([]int64, len(durations))
		for seed := range seeds {
			rng := seeded(100 + seed)
			now := int64(1_700_000_000)*nsPerSecond + rng.Int64N(p.Window)
			var counter key[CounterState]
			var exact key[LogState]
			var admitted, seen []int64 // the counter's admissions; every request
			oldestAdmitted, oldestSeen := 0, 0
			var all allRequestsCounter
			for range steps {
				now += sc.gap(rng)
				for oldestAdmitted < len(admitted) && admitted[oldestAdmitted] <= now-p.Window {
					oldestAdmitted++
				}
				exactAllows := int64(len(admitted)-oldestAdmitted)+1 <= p.Limit
				c, err := counter.check(now, p, 1)
				if err != nil {
					t.Fatal(err)
				}
				l, err := exact.check(now, p, 1)
				if err != nil {
					t.Fatal(err)
				}
				requests++
				if c.res.Limited != l.res.Limited {
					disagree++
				}
				switch {
				case !c.res.Limited && !exactAllows:
					wrongAllow++
				case c.res.Limited && exactAllows:
					wrongRefuse++
				}
				if !c.res.Limited {
					counterAdmits++
					admitted = append(admitted, now)
				}
				if !l.res.Limited {
					logAdmits++
				}

				seen = append(seen, now)
				for seen[oldestSeen] <= now-p.Window {
					oldestSeen++
				}
				if all.over(now, p) != (int64(len(seen)-oldestSeen) > p.Limit) {
					allWrong++
				}
			}
			for j, d := range durations {
				most := mostWithin(admitted, d)
				worst[j] = max(worst[j], most)
				if most*p.Window >= p.Limit*(p.Window+d) { // most < Limit·(1 + d/Window)
					t.Errorf("%s seed %d: counter admitted %d within %d ns, bound is < %d·(1 + %d/%d)",
						sc.name, seed, most, d, p.Limit, d, p.Window)
				}
			}
		}
		pct := func(n int) string { return fmt.Sprintf("%.3f%%", 100*float64(n)/float64(requests)) }
		t.Logf("%-11s %d req; admitted: counter %d, log %d; independent disagree %s; shadow wrongly allowed %s, wrongly refused %s; all-requests wrong %s",
			sc.name, requests, counterAdmits, logAdmits, pct(disagree), pct(wrongAllow), pct(wrongRefuse), pct(allWrong))
		t.Logf("%-11s most counter admissions within 2 s / 15 s / 60 s: %d / %d / %d (bounds < 103.3 / 125 / 200)",
			sc.name, worst[0], worst[1], worst[2])
	}
}

// allRequestsCounter is a sliding window counter that counts every request,
// refused or not, as Cloudflare's does.
type allRequestsCounter struct{ start, prev, curr int64 }

// over counts a request at now and reports whether the estimate, with it,
// exceeds the limit: prev·(W−elapsed) + curr·W > limit·W.
func (c *allRequestsCounter) over(now int64, p Params) bool {
	w := p.Window
	switch cur := windowStart(now, w); {
	case cur == c.start+w:
		c.start, c.prev, c.curr = cur, c.curr, 0
	case cur != c.start:
		c.start, c.prev, c.curr = cur, 0, 0
	}
	c.curr++
	return !mul128(c.prev, w-(now-c.start)).add(mul128(c.curr, w)).lessEq(mul128(p.Limit, w))
}

// mostWithin is the most admissions (ascending instants) in any interval
// (t−d, t]; the maximum is reached with t at an admission.
func mostWithin(admitted []int64, d int64) int64 {
	most, lo := 0, 0
	for hi, t := range admitted {
		for admitted[lo] <= t-d {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return int64(most)
}
