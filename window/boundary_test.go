package window

import (
	"slices"
	"testing"
)

// Limit 100 per 60 s around boundary, a multiple of 60 s since the epoch
// (28 333 334 minutes, in 2023).
var (
	perMinute = Params{Limit: 100, Window: 60 * nsPerSecond}
	boundary  = int64(28_333_334) * 60 * nsPerSecond
)

// admitN sends n unit requests at now and returns how many passed.
func admitN[S checker[S]](t *testing.T, k *key[S], now int64, p Params, n int) int {
	t.Helper()
	passed := 0
	for range n {
		out, err := k.check(now, p, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !out.res.Limited {
			passed++
		}
	}
	return passed
}

// The fixed window's known flaw: the limit again one instant later.
func TestFixedBoundaryBurst(t *testing.T) {
	var k key[FixedState]
	before := admitN(t, &k, boundary-nsPerSecond, perMinute, 100)
	after := admitN(t, &k, boundary+nsPerSecond, perMinute, 100)
	if before != 100 || after != 100 {
		t.Fatalf("admitted %d before and %d after the boundary, want 100 and 100", before, after)
	}
	out, _ := k.check(boundary+nsPerSecond, perMinute, 1)
	if !out.res.Limited || out.res.RetryAfter != 59*nsPerSecond {
		t.Fatalf("101st after the boundary: %+v, want limited until the window ends in 59 s", out.res)
	}
}

// The log admits nothing more until the first burst is a window old.
func TestLogBoundaryBurst(t *testing.T) {
	var k key[LogState]
	if got := admitN(t, &k, boundary-nsPerSecond, perMinute, 100); got != 100 {
		t.Fatalf("admitted %d before the boundary, want 100", got)
	}
	out, _ := k.check(boundary+nsPerSecond, perMinute, 1)
	// The burst leaves the window at boundary − 1 s + 60 s.
	if !out.res.Limited || out.res.RetryAfter != 58*nsPerSecond {
		t.Fatalf("after the boundary: %+v, want limited for 58 s", out.res)
	}
	if got := admitN(t, &k, boundary+59*nsPerSecond-1, perMinute, 1); got != 0 {
		t.Fatal("admitted 1 ns before the burst left the window")
	}
	if got := admitN(t, &k, boundary+59*nsPerSecond, perMinute, 101); got != 100 {
		t.Fatalf("admitted %d once the burst left, want 100", got)
	}
}

// The counter lets the previous sub-window's burst count 59/60 of itself
// one second past the boundary: 100·59/60 = 98.3, room for one unit.
func TestCounterBoundaryBurst(t *testing.T) {
	var k key[CounterState]
	if got := admitN(t, &k, boundary-nsPerSecond, perMinute, 100); got != 100 {
		t.Fatalf("admitted %d before the boundary, want 100", got)
	}
	if got := admitN(t, &k, boundary+nsPerSecond, perMinute, 100); got != 1 {
		t.Fatalf("admitted %d one second after the boundary, want 1", got)
	}
}

// The worst cases doc.go derives for the counter, reached: 199 in a full
// window (bound < 200) and 103 in 2 s (bound < 103.3).
func TestCounterWorstCases(t *testing.T) {
	var k key[CounterState]
	if got := admitN(t, &k, boundary-1, perMinute, 100); got != 100 {
		t.Fatalf("admitted %d in the last ns of a sub-window, want 100", got)
	}
	// 2 ns short of the next boundary the burst weighs 100·2/60e9.
	if got := admitN(t, &k, boundary+perMinute.Window-2, perMinute, 100); got != 99 {
		t.Fatalf("admitted %d at the end of the next sub-window, want 99", got)
	}

	k = key[CounterState]{}
	admitN(t, &k, boundary-1, perMinute, 100)
	// 2 s − 1 ns after the burst it weighs 100·(58 s + 1 ns)/60 s = 96.67.
	if got := admitN(t, &k, boundary+2*nsPerSecond-2, perMinute, 100); got != 3 {
		t.Fatalf("admitted %d within 2 s of the burst, want 3", got)
	}
}

// An attacker firing every 10 ms plus 150-request volleys on each side of
// every boundary, for five minutes: the most each algorithm admits in any
// 60 s interval, against what each promises.
func TestBoundaryAttack(t *testing.T) {
	var attack []int64
	for now := boundary - 90*nsPerSecond; now < boundary+210*nsPerSecond; now += 10 * 1_000_000 {
		attack = append(attack, now)
	}
	// volleys in the last and first nanosecond of sub-windows
	for b := boundary - 60*nsPerSecond; b <= boundary+180*nsPerSecond; b += perMinute.Window {
		for range 150 {
			attack = append(attack, b-1, b)
		}
	}
	slices.Sort(attack)

	most := func(run func(now int64) bool) int64 {
		var admitted []int64
		for _, now := range attack {
			if run(now) {
				admitted = append(admitted, now)
			}
		}
		return mostWithin(admitted, perMinute.Window)
	}
	var fk key[FixedState]
	var lk key[LogState]
	var ck key[CounterState]
	fixed := most(func(now int64) bool { o, _ := fk.check(now, perMinute, 1); return !o.res.Limited })
	exact := most(func(now int64) bool { o, _ := lk.check(now, perMinute, 1); return !o.res.Limited })
	counter := most(func(now int64) bool { o, _ := ck.check(now, perMinute, 1); return !o.res.Limited })
	t.Logf("most admitted in any 60 s: fixed %d, log %d, counter %d", fixed, exact, counter)
	if fixed != 200 {
		t.Errorf("fixed window admitted at most %d in 60 s, want the boundary's 200", fixed)
	}
	if exact != 100 {
		t.Errorf("log admitted at most %d in 60 s, want exactly the limit", exact)
	}
	if counter >= 200 || counter <= 100 {
		t.Errorf("counter admitted at most %d in 60 s, want above the limit (volleys at sub-window ends) and below 200", counter)
	}
}
