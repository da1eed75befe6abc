package cluster

import (
	"math"
	"sync"
	"testing"
)

// fakeMono is a monotonic source the test moves by hand.
type fakeMono struct {
	mu  sync.Mutex
	now int64
}

func (f *fakeMono) read() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeMono) set(v int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = v
}

func TestLeaderClockContinuesFromLastApplied(t *testing.T) {
	const last = 1_795_000_000_000_000_000 // Unix ns
	mono := &fakeMono{now: 42_000}         // any origin
	c := NewLeaderClock(last, mono.read)
	if got := c.Stamp(); got != last {
		t.Fatalf("first stamp = %d, want lastApplied %d", got, last)
	}
	for _, step := range []struct{ mono, want int64 }{
		{42_001, last + 1},
		{42_000 + 1_500_000_000, last + 1_500_000_000},
		{42_000 + 1_500_000_000, last + 1_500_000_000}, // no time passed: same stamp
		{42_000 + 3_000_000_000, last + 3_000_000_000},
	} {
		mono.set(step.mono)
		if got := c.Stamp(); got != step.want {
			t.Fatalf("mono %d: stamp = %d, want %d", step.mono, got, step.want)
		}
	}
}

func TestLeaderClockNeverGoesBack(t *testing.T) {
	mono := &fakeMono{now: 1000}
	c := NewLeaderClock(500, mono.read)
	mono.set(1300)
	if got := c.Stamp(); got != 800 {
		t.Fatalf("stamp = %d, want 800", got)
	}
	// A source that steps back (before its start, or below its last
	// reading) holds the stamp.
	for _, m := range []int64{1200, 900, math.MinInt64} {
		mono.set(m)
		if got := c.Stamp(); got != 800 {
			t.Fatalf("mono back to %d: stamp = %d, want 800", m, got)
		}
	}
	mono.set(1301)
	if got := c.Stamp(); got != 801 {
		t.Fatalf("mono past its old reading: stamp = %d, want 801", got)
	}
}

func TestLeaderClockSaturates(t *testing.T) {
	cases := []struct {
		base, start, now, want int64
	}{
		{math.MaxInt64 - 10, 0, 5, math.MaxInt64 - 5},
		{math.MaxInt64 - 10, 0, 10, math.MaxInt64},
		{math.MaxInt64 - 10, 0, 11, math.MaxInt64},
		{0, math.MinInt64, math.MaxInt64, math.MaxInt64},                 // elapsed 2^64-1
		{math.MinInt64, math.MinInt64, math.MaxInt64, math.MaxInt64},     // base + 2^64-1 overflows
		{math.MinInt64, 0, math.MaxInt64, -1},                            // MinInt64 + MaxInt64
		{-5, 100, 103, -2},                                               // negative stamps are fine
		{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64, math.MaxInt64}, // already at the top
	}
	for _, tc := range cases {
		mono := &fakeMono{now: tc.start}
		c := NewLeaderClock(tc.base, mono.read)
		mono.set(tc.now)
		if got := c.Stamp(); got != tc.want {
			t.Errorf("base %d, start %d, now %d: stamp = %d, want %d", tc.base, tc.start, tc.now, got, tc.want)
		}
	}
}

// Stamps taken concurrently never go back as each caller sees them.
func TestLeaderClockConcurrentStampsAreNonDecreasing(t *testing.T) {
	mono := &fakeMono{}
	c := NewLeaderClock(0, mono.read)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			prev := int64(math.MinInt64)
			for i := range 2000 {
				if g == 0 {
					mono.set(int64(i))
				}
				s := c.Stamp()
				if s < prev {
					t.Errorf("stamp went from %d to %d", prev, s)
					return
				}
				prev = s
			}
		})
	}
	wg.Wait()
}

// A new leader's clock: a log behind the wall clock (a group that was
// down) comes forward to it, by at most the catch-up bound; a wall clock
// behind the log never moves it back; a fresh log starts at the wall.
func TestTakeoverBase(t *testing.T) {
	const min, hour = int64(60e9), int64(3600e9)
	day := 24 * hour
	for _, tc := range []struct {
		name                 string
		last, wall, catchUp  int64
		fresh                bool
		wantBase, wantJumped int64
	}{
		{"down ten minutes", 1000 * hour, 1000*hour + 10*min, day, false, 1000*hour + 10*min, 10 * min},
		{"down two days: a day forward", 1000 * hour, 1000*hour + 2*day, day, false, 1000*hour + day, day},
		{"wall behind the log", 1000 * hour, 999 * hour, day, false, 1000 * hour, 0},
		{"wall equal", 1000 * hour, 1000 * hour, day, false, 1000 * hour, 0},
		{"catch-up off", 1000 * hour, 1001 * hour, -1, false, 1000 * hour, 0},
		{"fresh log", 0, 1234, day, true, 1234, 0},
	} {
		base, jumped := TakeoverBase(tc.last, tc.fresh, tc.wall, tc.catchUp)
		if base != tc.wantBase || jumped != tc.wantJumped {
			t.Errorf("%s: base %d jumped %d, want %d %d", tc.name, base, jumped, tc.wantBase, tc.wantJumped)
		}
		if !tc.fresh && base < tc.last {
			t.Errorf("%s: time went back", tc.name)
		}
	}
}
