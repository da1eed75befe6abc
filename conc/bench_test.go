package conc

import (
	"fmt"
	"testing"
)

// benchAcquireRelease measures one acquire and one release of the same id on
// a key already holding limit-1 leases (the worst case that still admits),
// with leases long enough that nothing expires.
func benchAcquireRelease(b *testing.B, limit int64) {
	var l Leases
	for i := range limit - 1 {
		// UUID-sized ids, as clients typically send.
		if _, err := l.Acquire(t0, limit, 60*second, fmt.Appendf(nil, "%036d", i)); err != nil {
			b.Fatal(err)
		}
	}
	req := fmt.Appendf(nil, "%036d", limit)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now++
		r, err := l.Acquire(now, limit, 60*second, req)
		if err != nil || r.Limited {
			b.Fatalf("%+v %v", r, err)
		}
		if !l.Release(now, req) {
			b.Fatal("release failed")
		}
	}
}

func BenchmarkAcquireRelease20(b *testing.B)    { benchAcquireRelease(b, 20) }
func BenchmarkAcquireRelease1000(b *testing.B)  { benchAcquireRelease(b, 1000) }
func BenchmarkAcquireRelease10000(b *testing.B) { benchAcquireRelease(b, MaxLimit) }

// BenchmarkAcquireLimited is the refusal path at a full key of 1000.
func BenchmarkAcquireLimited1000(b *testing.B) {
	var l Leases
	for i := range 1000 {
		l.Acquire(t0, 1000, 60*second, fmt.Appendf(nil, "%036d", i))
	}
	req := []byte("refused-request-000000000000000000000")
	b.ReportAllocs()
	for b.Loop() {
		if r, _ := l.Acquire(t0+1, 1000, 60*second, req); !r.Limited {
			b.Fatal("admitted")
		}
	}
}

// BenchmarkChurn20 is a steady stream of requests at limit 20 whose leases
// end by expiry as often as by release, so pruning is on the path.
func BenchmarkChurn20(b *testing.B) {
	var l Leases
	ids := make([][]byte, 64)
	for i := range ids {
		ids[i] = fmt.Appendf(nil, "%036d", i)
	}
	now := t0
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		now += 50
		i++
		l.Acquire(now, 20, 1000, ids[i%len(ids)])
		if i%2 == 0 {
			l.Release(now, ids[(i+37)%len(ids)])
		}
	}
}

// benchFIFO is requests finishing in the order they started: each call
// acquires a new lease and releases the oldest, the pattern of a key whose
// requests all take about as long.
func benchFIFO(b *testing.B, limit int) {
	var l Leases
	ids := make([][]byte, limit)
	for i := range ids {
		ids[i] = fmt.Appendf(nil, "%036d", i)
	}
	now := t0
	for i := range limit - 1 {
		now++
		l.Acquire(now, int64(limit), 60*second, ids[i])
	}
	i := limit - 1
	b.ReportAllocs()
	for b.Loop() {
		now++
		if r, err := l.Acquire(now, int64(limit), 60*second, ids[i%limit]); err != nil || r.Limited {
			b.Fatalf("%+v %v", r, err)
		}
		i++
		if !l.Release(now, ids[i%limit]) {
			b.Fatal("release failed")
		}
	}
}

func BenchmarkFIFO20(b *testing.B)    { benchFIFO(b, 20) }
func BenchmarkFIFO1000(b *testing.B)  { benchFIFO(b, 1000) }
func BenchmarkFIFO10000(b *testing.B) { benchFIFO(b, MaxLimit) }
