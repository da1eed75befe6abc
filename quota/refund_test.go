package quota

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// Random histories around one charge of n units, then a refund keeping m:
// the state as a check at now sees it equals the replay of the admissions
// with m units charged instead of n (the quota counts units per period, so
// the refund is exact within the period, and nothing once it has ended).
func TestRefundInIsTheReplay(t *testing.T) {
	sch, err := NewSchedule(Hour, 0, false, "UTC")
	if err != nil {
		t.Fatal(err)
	}
	hour := int64(time.Hour)
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 20000 {
		limit := 1 + rng.Int64N(12)
		type event struct {
			at, cost int64
			ours     bool
		}
		var events []event
		var st State
		exists := false
		now := int64(1_767_225_600_000_000_000) + rng.Int64N(hour)
		others := func() {
			for range rng.IntN(5) {
				now += rng.Int64N(hour / 2)
				cost := rng.Int64N(3)
				if next, stored, _, err := Check(st, exists, now, limit, sch, cost); err == nil && stored {
					st, exists = next, true
					events = append(events, event{now, cost, false})
				}
			}
		}
		others()
		now += rng.Int64N(hour / 2)
		n := 1 + rng.Int64N(limit)
		next, stored, _, err := Check(st, exists, now, limit, sch, n)
		if err != nil || !stored {
			continue
		}
		st, exists = next, true
		start := st.Start
		events = append(events, event{now, n, true})
		others()
		now += rng.Int64N(2 * hour)
		kept := rng.Int64N(n + 1)
		given, err := st.RefundIn(start, now, n-kept)
		if err != nil || given < 0 || given > n-kept {
			t.Fatalf("trial %d: gave back %d of %d (%v)", trial, given, n-kept, err)
		}
		var replay State
		rexists := false
		for _, e := range events {
			cost := e.cost
			if e.ours {
				cost = kept
			}
			replay, _ = Force(replay, rexists, e.at, limit, sch, cost)
			rexists = true
		}
		got, _ := st.Get(now)
		want, _ := replay.Get(now)
		if got != want {
			t.Fatalf("trial %d: refunded %+v, the replay %+v (events %+v, n %d kept %d)", trial, got, want, events, n, kept)
		}
	}
}

// A charge past any count saturates: the period is used up, never charged
// nothing (issue #43).
func TestForceSaturatesAtTheBounds(t *testing.T) {
	sch, err := NewSchedule(Hour, 0, false, "UTC")
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1_800_000_000e9)
	for _, cost := range []int64{math.MaxInt64, 1 << 62} {
		st, err := Force(State{}, false, now, 10, sch, cost)
		if err != nil {
			t.Fatal(err)
		}
		st, err = Force(st, true, now+1, 10, sch, cost) // and again on top
		if err != nil {
			t.Fatal(err)
		}
		if _, _, r, err := Check(st, true, now+2, 10, sch, 1); err != nil || !r.Limited {
			t.Fatalf("after charges of %d: %+v %v", cost, r, err)
		}
	}
}
