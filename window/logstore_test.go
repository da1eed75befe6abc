package window

import (
	"math"
	"testing"
	"unsafe"
)

// Units admitted at one nanosecond share an entry.
func TestLogRunLength(t *testing.T) {
	p := Params{Limit: 1000, Window: 60 * sec}
	var k key[LogState]
	if got := admitN(t, &k, t0, p, 1000); got != 1000 {
		t.Fatalf("admitted %d of 1000", got)
	}
	if k.s.Entries() != 1 || k.s.Units() != 1000 {
		t.Errorf("1000 units at one instant: %d entries, %d units; want 1 and 1000", k.s.Entries(), k.s.Units())
	}
	if n := len(k.s.AppendBinary(nil)); n > 12 {
		t.Errorf("encoding is %d bytes", n)
	}
}

// Check never changes what an older value of the state holds, whether it
// stores or refuses, so a value handed to a snapshot stays valid.
func TestLogCheckLeavesOldStateIntact(t *testing.T) {
	p := Params{Limit: 50, Window: 100}
	var s LogState
	exists := false
	rng := seeded(7)
	now := t0
	for i := range 5_000 {
		now += rng.Int64N(6)
		before := s.AppendBinary(nil)
		next, store, _, _, err := s.Check(exists, now, p, 1+rng.Int64N(3))
		if err != nil {
			t.Fatal(err)
		}
		if after := s.AppendBinary(nil); string(after) != string(before) {
			t.Fatalf("step %d: the old state changed", i)
		}
		if store {
			s, exists = next, true
		}
	}
}

// A clone shares nothing: both sides can be stored independently.
func TestLogClone(t *testing.T) {
	p := Params{Limit: 10, Window: 100}
	s := logFrom(t, p, admission{t0, 1}, admission{t0 + 1, 1}, admission{t0 + 2, 1})
	c := s.Clone()
	a, _, _, _, _ := s.Check(true, t0+3, p, 1)
	b, _, _, _, _ := c.Check(true, t0+3, p, 2)
	want := func(last int64) []admission {
		return []admission{{t0, 1}, {t0 + 1, 1}, {t0 + 2, 1}, {t0 + 3, last}}
	}
	if !sameEntries(entriesOf(a), want(1)) || !sameEntries(entriesOf(b), want(2)) {
		t.Errorf("successors %v and %v", entriesOf(a), entriesOf(b))
	}
}

// When the running totals would pass 2³², admit starts them over.
func TestLogRunningTotalRebase(t *testing.T) {
	s := LogState{
		times:     make([]int64, 2, 8),
		cum:       make([]uint32, 2, 8),
		head:      1,
		tail:      t0 + 2,
		tailUnits: 10,
	}
	s.times[0], s.cum[0] = t0, math.MaxUint32-8
	s.times[1], s.cum[1] = t0+1, math.MaxUint32-3
	p := Params{Limit: 100, Window: 100}
	next, store, _, res, err := s.Check(true, t0+3, p, 4)
	if err != nil || !store || res.Remaining != 100-5-10-4 {
		t.Fatalf("store=%v res=%+v err=%v", store, res, err)
	}
	want := []admission{{t0 + 1, 5}, {t0 + 2, 10}, {t0 + 3, 4}}
	if got := entriesOf(next); !sameEntries(got, want) || next.cum[len(next.cum)-1] != 15 {
		t.Errorf("entries %v, totals %v; want %v", got, next.cum, want)
	}
}

// A log holds at most about twice its live entries, and gives its arrays
// back once everything has left the window.
func TestLogMemoryBound(t *testing.T) {
	p := Params{Limit: 1000, Window: 60 * sec}
	var k key[LogState]
	rng := seeded(9)
	now := t0
	peak := 0
	for i := range 200_000 {
		// the rate drifts between well below and well above the limit
		now += 1 + rng.Int64N(p.Window/p.Limit*int64(1+(i/20_000)%4))
		if _, err := k.check(now, p, 1); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, k.s.Entries())
		if limit := int64(unsafe.Sizeof(LogState{})) + 12*int64(max(minLogCap, 2*(peak+1))); k.s.MemoryBytes() > limit {
			t.Fatalf("step %d: %d bytes for %d entries (peak %d)", i, k.s.MemoryBytes(), k.s.Entries(), peak)
		}
	}
	if peak < 900 {
		t.Fatalf("the trace never filled the log (peak %d entries)", peak)
	}
	if _, err := k.check(now+p.Window, p, 1); err != nil {
		t.Fatal(err)
	}
	if got := k.s.MemoryBytes(); got != int64(unsafe.Sizeof(LogState{})) {
		t.Errorf("a log holding one entry after a quiet window keeps %d bytes", got)
	}
}
