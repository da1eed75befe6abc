package window

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refundCase drives one algorithm through random histories: other callers'
// admissions around one charge of n units, then a refund keeping m at a
// later instant. seen is the state as decisions at now read it.
type refundCase[S any] struct {
	check  func(s S, exists bool, now int64, p Params, cost int64) (S, bool, error)
	force  func(s S, exists bool, now int64, p Params, cost int64) S
	anchor func(after S, now int64) int64 // what the charge records
	refund func(s S, p Params, anchor, n int64) (S, int64)
	seen   func(s S, now int64, p Params) string
}

func runRefundCase[S any](t *testing.T, c refundCase[S]) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 20000 {
		p := Params{Limit: 1 + rng.Int64N(12), Window: 1 + rng.Int64N(100)}
		type event struct {
			at, cost int64
			ours     bool
		}
		var events []event
		var s S
		exists := false
		now := rng.Int64N(1000)
		step := func(span int64) { now += rng.Int64N(span) }
		others := func() {
			for range rng.IntN(5) {
				step(p.Window)
				cost := rng.Int64N(3)
				if next, stored, err := c.check(s, exists, now, p, cost); err == nil && stored {
					s, exists = next, true
					events = append(events, event{now, cost, false})
				}
			}
		}
		others()
		step(p.Window)
		n := 1 + rng.Int64N(p.Limit)
		next, stored, err := c.check(s, exists, now, p, n)
		if err != nil || !stored {
			continue
		}
		s, exists = next, true
		anchor := c.anchor(s, now)
		events = append(events, event{now, n, true})
		others()
		step(3 * p.Window)
		kept := rng.Int64N(n + 1)
		refunded, given := c.refund(s, p, anchor, n-kept)
		if given < 0 || given > n-kept {
			t.Fatalf("trial %d: gave back %d of %d", trial, given, n-kept)
		}
		var replay S
		rexists := false
		for _, e := range events {
			cost := e.cost
			if e.ours {
				cost = kept
			}
			replay = c.force(replay, rexists, e.at, p, cost)
			rexists = true
		}
		if got, want := c.seen(refunded, now, p), c.seen(replay, now, p); got != want {
			t.Fatalf("trial %d: refunded %s, the replay without the units %s (events %+v, n %d kept %d, params %+v)",
				trial, got, want, events, n, kept, p)
		}
	}
}

// The window states are sums per window: a refund is the replay without
// the refunded units, exactly, however many others counted since.
func TestRefundIsTheReplay(t *testing.T) {
	t.Run("sliding counter", func(t *testing.T) {
		runRefundCase(t, refundCase[CounterState]{
			check: func(s CounterState, exists bool, now int64, p Params, cost int64) (CounterState, bool, error) {
				st, stored, _, _, err := s.Check(exists, now, p, cost)
				return st, stored, err
			},
			force: func(s CounterState, exists bool, now int64, p Params, cost int64) CounterState {
				st, _, _ := s.Force(exists, now, p, cost)
				return st
			},
			anchor: func(s CounterState, _ int64) int64 { return s.Start },
			refund: func(s CounterState, p Params, start, n int64) (CounterState, int64) {
				return s.Refund(p.Window, start, n)
			},
			seen: func(s CounterState, now int64, p Params) string {
				st, _ := s.rolled(true, now, p.Window)
				return fmt.Sprintf("%+v", st)
			},
		})
	})
	t.Run("fixed window", func(t *testing.T) {
		runRefundCase(t, refundCase[FixedState]{
			check: func(s FixedState, exists bool, now int64, p Params, cost int64) (FixedState, bool, error) {
				st, stored, _, _, err := s.Check(exists, now, p, cost)
				return st, stored, err
			},
			force: func(s FixedState, exists bool, now int64, p Params, cost int64) FixedState {
				st, _, _ := s.Force(exists, now, p, cost)
				return st
			},
			anchor: func(s FixedState, _ int64) int64 { return s.Start },
			refund: func(s FixedState, p Params, start, n int64) (FixedState, int64) { return s.Refund(p.Window, start, n) },
			seen: func(s FixedState, now int64, p Params) string {
				return fmt.Sprintf("%+v", s.rolled(true, now, p.Window))
			},
		})
	})
	t.Run("sliding log", func(t *testing.T) {
		runRefundCase(t, refundCase[LogState]{
			check: func(s LogState, exists bool, now int64, p Params, cost int64) (LogState, bool, error) {
				st, stored, _, _, err := s.Check(exists, now, p, cost)
				return st.Clone(), stored, err
			},
			force: func(s LogState, exists bool, now int64, p Params, cost int64) LogState {
				st, _, _ := s.Force(exists, now, p, cost)
				return st.Clone()
			},
			anchor: func(s LogState, _ int64) int64 { return s.tail },
			refund: func(s LogState, _ Params, at, n int64) (LogState, int64) { return s.Refund(at, n) },
			seen: func(s LogState, now int64, p Params) string {
				// The entries a decision at now counts, oldest first.
				horizon := now - p.Window
				out := ""
				for j := s.firstAfter(horizon); j < len(s.times); j++ {
					out += fmt.Sprintf("%d:%d ", s.times[j], int64(s.cum[j])-s.cumBefore(j))
				}
				if s.tailUnits > 0 && s.tail > horizon {
					out += fmt.Sprintf("%d:%d", s.tail, s.tailUnits)
				}
				return out
			},
		})
	})
}

// A charge past any count saturates in every window kind: the key is
// refused afterwards, never charged nothing (issue #43; GCRA's Force
// saturates its instant the same way).
func TestForceSaturatesAtTheBounds(t *testing.T) {
	p := Params{Limit: 10, Window: 60e9}
	now := int64(1_800_000_000e9)
	for _, cost := range []int64{math.MaxInt64, math.MaxInt64 - 1, 1 << 62} {
		c, _, err := CounterState{}.Force(false, now, p, cost)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, r, err := c.Check(true, now+1, p, 1); err != nil || !r.Limited {
			t.Fatalf("sliding counter after a charge of %d: %+v %v", cost, r, err)
		}
		f, _, err := FixedState{}.Force(false, now, p, cost)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, r, err := f.Check(true, now+1, p, 1); err != nil || !r.Limited {
			t.Fatalf("fixed window after a charge of %d: %+v %v", cost, r, err)
		}
		l, _, err := LogState{}.Force(false, now, p, cost)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, r, err := l.Check(true, now+1, p, 1); err != nil || !r.Limited {
			t.Fatalf("sliding log after a charge of %d: %+v %v", cost, r, err)
		}
	}
}

// A refund never gives back more than its window counted (a refund of the
// latest charge, Envoy's is_negative_hits, may ask for more): it floors at
// nothing counted, in the current window and in the previous one alike.
func TestRefundFloorsAtNothingCounted(t *testing.T) {
	c := CounterState{Window: 10, Start: 100, Prev: 1, Curr: 2}
	if got, given := c.Refund(10, 100, 5); got.Curr != 0 || got.Prev != 1 || given != 2 {
		t.Fatalf("current window: %+v gave %d, want 2 back and none left", got, given)
	}
	if got, given := c.Refund(10, 90, 5); got.Prev != 0 || got.Curr != 2 || given != 1 {
		t.Fatalf("previous window: %+v gave %d, want 1 back and none left", got, given)
	}
	f := FixedState{Window: 10, Start: 100, Count: 3}
	if got, given := f.Refund(10, 100, 7); got.Count != 0 || given != 3 {
		t.Fatalf("fixed window: %+v gave %d, want 3 back and none left", got, given)
	}
}
