package window

import (
	"testing"

	"github.com/sluice-rl/sluice/limiter"
)

const sec = nsPerSecond

// t0 is the instant the step tables count from: a multiple of every window
// they use, so sub-windows start at t0 + k·window.
var t0 = boundary

// step is one check in a table: at t0+at, cost units under p.
type step struct {
	at, cost int64
	p        Params
	want     limiter.Result
	store    bool
}

// ok and limited build the expected results.
func ok(limit, remaining, reset int64) limiter.Result {
	return limiter.Result{Limit: limit, Remaining: remaining, RetryAfter: limiter.Never, ResetAfter: reset}
}

func limited(limit, remaining, retry, reset int64) limiter.Result {
	return limiter.Result{Limited: true, Limit: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

// runSteps plays the steps in order on one key (stored and expired as the
// keyspace would) and checks every result.
func runSteps[S checker[S]](t *testing.T, steps []step) {
	t.Helper()
	var k key[S]
	for i, s := range steps {
		got, err := k.check(t0+s.at, s.p, s.cost)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got.res != s.want || got.store != s.store {
			t.Errorf("step %d (at %v, cost %d): got %+v store=%v, want %+v store=%v",
				i, s.at, s.cost, got.res, got.store, s.want, s.store)
		}
	}
}

// Values worked by hand from estimate = prev·(10 s − elapsed)/10 s + curr.
func TestCounterSteps(t *testing.T) {
	p := Params{Limit: 10, Window: 10 * sec}
	runSteps[CounterState](t, []step{
		{0, 4, p, ok(10, 6, 20*sec), true},
		{5 * sec, 6, p, ok(10, 0, 15*sec), true},
		// next sub-window at y: 10·(10 s − y)/10 s ≤ 9 → y = 1 s, at 11 s
		{9 * sec, 1, p, limited(10, 0, 2*sec, 11*sec), false},
		{11 * sec, 1, p, ok(10, 0, 19*sec), true},  // 10·0.9 + 1 = 10
		{15 * sec, 0, p, ok(10, 4, 15*sec), false}, // 10·0.5 + 1 = 6
		// 10·(10 s − x)/10 s + 1 + 5 ≤ 10 → x = 6 s
		{15 * sec, 5, p, limited(10, 4, 1*sec, 15*sec), false},
		{16 * sec, 5, p, ok(10, 0, 14*sec), true}, // 10·0.4 + 1 + 5 = 10
		{16 * sec, 11, p, limited(10, 0, limiter.Never, 14*sec), false},
		{17 * sec, 0, p, ok(10, 1, 13*sec), false},             // 10·0.3 + 6 = 9
		{17*sec + sec/2, 0, p, ok(10, 1, 12*sec+sec/2), false}, // 8.5: floor(1.5)
		{31 * sec, 0, p, ok(10, 10, 0), false},                 // both sub-windows gone
	})
}

func TestLogSteps(t *testing.T) {
	p := Params{Limit: 3, Window: 10 * sec}
	runSteps[LogState](t, []step{
		{0, 1, p, ok(3, 2, 10*sec), true},
		{1 * sec, 1, p, ok(3, 1, 10*sec), true},
		{1 * sec, 1, p, ok(3, 0, 10*sec), true},
		// the unit at 0 leaves at 10 s
		{3 * sec, 1, p, limited(3, 0, 7*sec, 8*sec), false},
		{10*sec - 1, 1, p, limited(3, 0, 1, 1*sec+1), false},
		// at 10 s two units (both at 1 s) remain; they leave together at 11 s
		{10 * sec, 2, p, limited(3, 1, 1*sec, 1*sec), false},
		{10 * sec, 1, p, ok(3, 0, 10*sec), true},
		{11 * sec, 3, p, limited(3, 2, 9*sec, 9*sec), false},
		{11 * sec, 0, p, ok(3, 2, 9*sec), false},
		{11 * sec, 4, p, limited(3, 2, limiter.Never, 9*sec), false},
		{20 * sec, 0, p, ok(3, 3, 0), false},
	})
}

func TestFixedSteps(t *testing.T) {
	p := Params{Limit: 5, Window: 10 * sec}
	runSteps[FixedState](t, []step{
		{9 * sec, 5, p, ok(5, 0, 1*sec), true},
		{9*sec + sec/2, 1, p, limited(5, 0, sec/2, sec/2), false},
		{10*sec - 1, 0, p, ok(5, 0, 1), false},
		{10 * sec, 1, p, ok(5, 4, 10*sec), true},
		{10 * sec, 6, p, limited(5, 4, limiter.Never, 10*sec), false},
		{10 * sec, 0, p, ok(5, 4, 10*sec), false},
		{20 * sec, 0, p, ok(5, 5, 0), false},
	})
}

// A now before what the key has seen is treated as the key's latest
// instant, and durations still count from the real now.
func TestClockGoingBack(t *testing.T) {
	p := Params{Limit: 10, Window: 10 * sec}
	runSteps[CounterState](t, []step{
		{12 * sec, 10, p, ok(10, 0, 18*sec), true},
		// decided at 10 s (elapsed 0): passes once 10·(10 s − y)/10 s ≤ 9, at 21 s
		{5 * sec, 1, p, limited(10, 0, 16*sec, 25*sec), false},
	})
	p1 := Params{Limit: 1, Window: 10 * sec}
	runSteps[LogState](t, []step{
		{10 * sec, 1, p1, ok(1, 0, 10*sec), true},
		{4 * sec, 1, p1, limited(1, 0, 16*sec, 16*sec), false},
	})
	p5 := Params{Limit: 5, Window: 10 * sec}
	runSteps[FixedState](t, []step{
		{12 * sec, 5, p5, ok(5, 0, 8*sec), true},
		{5 * sec, 1, p5, limited(5, 0, 15*sec, 15*sec), false},
	})
}

// doc.go: a new limit applies to what is counted; a new window starts the
// counter and the fixed window over, while the log reinterprets its instants.
func TestChangedParams(t *testing.T) {
	w10 := Params{Limit: 10, Window: 10 * sec}
	w20 := Params{Limit: 10, Window: 20 * sec}
	low := Params{Limit: 5, Window: 10 * sec}
	runSteps[CounterState](t, []step{
		{0, 8, w10, ok(10, 2, 20*sec), true},
		// over the lowered limit; the next sub-window's 8·(10 s − y)/10 s ≤ 5
		// needs y = 3.75 s: at 13.75 s
		{5 * sec, 0, low, limited(5, 0, 8*sec+750_000_000, 15*sec), false},
		{1 * sec, 0, w20, ok(10, 10, 0), false},
		{1 * sec, 10, w20, ok(10, 0, 39*sec), true},
		{2 * sec, 1, w10, ok(10, 9, 18*sec), true}, // and back: fresh again
	})
	runSteps[FixedState](t, []step{
		{0, 8, w10, ok(10, 2, 10*sec), true},
		{5 * sec, 0, low, limited(5, 0, 5*sec, 5*sec), false},
		{5 * sec, 10, w20, ok(10, 0, 15*sec), true},
	})
	one := func(w int64) Params { return Params{Limit: 1, Window: w} }
	two := func(w int64) Params { return Params{Limit: 2, Window: w} }
	runSteps[LogState](t, []step{
		{0, 1, two(10 * sec), ok(2, 1, 10*sec), true},
		{5 * sec, 1, two(10 * sec), ok(2, 0, 10*sec), true},
		// a 5 s window at 8 s holds only the unit at 5 s
		{8 * sec, 1, one(5 * sec), limited(1, 0, 2*sec, 2*sec), false},
		{8 * sec, 0, two(20 * sec), ok(2, 0, 17*sec), false},
		// prunes the units at 0 and at 5 s (exactly a window old) ...
		{10 * sec, 1, one(5 * sec), ok(1, 0, 5*sec), true},
		// ... which a longer window then cannot see
		{10 * sec, 0, two(20 * sec), ok(2, 1, 20*sec), false},
	})
}
