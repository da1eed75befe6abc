package gcra

import (
	"math"
	"testing"
)

// FuzzThrottle checks the invariants that must hold for any input: no panic,
// results in range, and a stored TAT that matches the reported reset.
func FuzzThrottle(f *testing.F) {
	f.Add(int64(0), false, t0, int64(15), int64(30), 60*sec, int64(1))
	f.Add(t0+32*sec, true, t0, int64(15), int64(30), 60*sec, int64(1))
	f.Add(int64(math.MaxInt64), true, t0, int64(math.MaxInt64-1), int64(1), int64(1), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, tat int64, exists bool, now, burst, count, period, q int64) {
		l := Limit{MaxBurst: burst, Count: count, Period: period}
		newTAT, store, r, err := Throttle(tat, exists, now, l, q)
		if err != nil {
			if store {
				t.Fatal("store with error")
			}
			return
		}
		if r.Limit != burst+1 || r.Remaining < 0 || r.Remaining > r.Limit || r.ResetAfter < 0 {
			t.Fatalf("out of range: %+v", r)
		}
		if r.Limited && r.RetryAfter != -1 && r.RetryAfter <= 0 {
			t.Fatalf("limited with retry %d", r.RetryAfter)
		}
		if store && (r.Limited || q == 0 || newTAT-now != r.ResetAfter || r.ResetAfter <= 0) {
			t.Fatalf("bad store: newTAT %d now %d %+v", newTAT, now, r)
		}
		if !store && newTAT != tat {
			t.Fatalf("not stored but newTAT changed")
		}
	})
}
