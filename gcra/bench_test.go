package gcra

import "testing"

func BenchmarkThrottle(b *testing.B) {
	l := Limit{MaxBurst: 15, Count: 30, Period: 60 * sec}
	var tat int64
	var exists bool
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now += 100 * ms
		newTAT, store, _, err := Throttle(tat, exists, now, l, 1)
		if err != nil {
			b.Fatal(err)
		}
		if store {
			tat, exists = newTAT, true
		}
	}
}
