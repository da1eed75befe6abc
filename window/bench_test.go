package window

import (
	"fmt"
	"testing"
)

// benchCheck runs one key through b.N checks, now advancing by step, the
// state stored whenever the check says so (as the keyspace would).
func benchCheck[S checker[S]](b *testing.B, k *key[S], now, step int64, p Params, cost int64) {
	b.ReportAllocs()
	for b.Loop() {
		now += step
		if _, err := k.check(now, p, cost); err != nil {
			b.Fatal(err)
		}
	}
}

// Each at 100 per 60 s, one request a millisecond: mostly refusals, the
// common case under attack.
func BenchmarkCounterCheck(b *testing.B) {
	benchCheck(b, &key[CounterState]{}, t0, 1_000_000, perMinute, 1)
}

func BenchmarkFixedCheck(b *testing.B) {
	benchCheck(b, &key[FixedState]{}, t0, 1_000_000, perMinute, 1)
}

// A full log at its steady state: each admission prunes one entry.
func BenchmarkLogCheckAdmit(b *testing.B) {
	for _, limit := range []int64{10, 1_000, MaxLogLimit} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			p := Params{Limit: limit, Window: 60 * sec}
			step := p.Window / limit
			k, now := filledLog(b, p, limit, step)
			benchCheck(b, k, now, step, p, 1)
		})
	}
}

// A full log refusing: the binary searches for the count and RetryAfter.
func BenchmarkLogCheckRefuse(b *testing.B) {
	for _, limit := range []int64{10, 1_000, MaxLogLimit} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			p := Params{Limit: limit, Window: 60 * sec}
			k, now := filledLog(b, p, limit, p.Window/limit/2)
			benchCheck(b, k, now, 1, p, 1)
		})
	}
}

// filledLog admits n units step apart and returns the key and the last
// instant.
func filledLog(b *testing.B, p Params, n, step int64) (*key[LogState], int64) {
	b.Helper()
	k := &key[LogState]{}
	now := t0
	for range n {
		now += step
		out, err := k.check(now, p, 1)
		if err != nil || out.res.Limited {
			b.Fatalf("filling: %+v %v", out.res, err)
		}
	}
	return k, now
}

// Bytes per key for a log holding n distinct timestamps (one unit each),
// in memory and encoded; the loop measures encoding.
func BenchmarkLogBytesPerKey(b *testing.B) {
	for _, n := range []int64{1, 10, 100, 1_000, 10_000, MaxLogLimit} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			p := Params{Limit: n, Window: 60 * sec}
			k, _ := filledLog(b, p, n, p.Window/n/2)
			mem := k.s.MemoryBytes()
			enc := len(k.s.AppendBinary(nil))
			buf := make([]byte, 0, enc)
			b.ReportAllocs()
			for b.Loop() {
				buf = k.s.AppendBinary(buf[:0])
			}
			b.ReportMetric(float64(mem), "mem-B/key")
			b.ReportMetric(float64(mem)/float64(n), "mem-B/entry")
			b.ReportMetric(float64(enc), "enc-B/key")
		})
	}
}

func BenchmarkDecodeLog(b *testing.B) {
	p := Params{Limit: 1_000, Window: 60 * sec}
	k, _ := filledLog(b, p, 1_000, p.Window/2_000)
	enc := k.s.AppendBinary(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeLog(enc); err != nil {
			b.Fatal(err)
		}
	}
}
