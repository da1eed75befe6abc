package commands

import (
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkBytesPerKey fills a fresh in-process keyspace with keys of one
// kind, one admitted request each (or entries distinct timestamps for the
// full log), and reports the heap growth per key: the slot tables, the key
// bytes and the state objects. It measures once, whatever b.N: the metric is
// memory, not time. Run with -benchtime=1x.
func BenchmarkBytesPerKey(b *testing.B) {
	for _, tc := range []struct {
		name    string
		keys    int
		entries int
		args    []string
	}{
		{"gcra", 1_000_000, 1, []string{"CL.THROTTLE", "", "99", "100", "60"}},
		{"sliding-counter", 1_000_000, 1, []string{"SW.CHECK", "", "100", "60"}},
		{"sliding-log", 1_000_000, 1, []string{"SW.CHECK", "", "100", "60", "EXACT"}},
		{"sliding-log-full-100", 100_000, 100, []string{"SW.CHECK", "", "100", "60", "EXACT"}},
		{"fixed-window", 1_000_000, 1, []string{"FW.CHECK", "", "100", "60"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := newWindowHarness(b, windowT0+1)
			args := make([][]byte, len(tc.args))
			for i, a := range tc.args {
				args[i] = []byte(a)
			}
			before := heapInUse()
			for i := range tc.keys {
				args[1] = strconv.AppendInt([]byte("key:"), int64(i), 10)
				for range tc.entries {
					h.now += 1000 // distinct timestamps, all within the window
					h.ctx.Reset()
					h.ctx.W.Buf = h.ctx.W.Buf[:0]
					h.env.Table.Dispatch(&h.ctx, args)
					if h.ctx.W.Buf[0] != '*' || h.ctx.W.Buf[5] != '0' {
						b.Fatalf("%s: refused or failed: %q", args[1], h.ctx.W.Buf)
					}
				}
			}
			after := heapInUse()
			st := h.env.Machine.Keys().Stats()
			if st.Keys != tc.keys {
				b.Fatalf("%d keys, want %d", st.Keys, tc.keys)
			}
			runtime.KeepAlive(h)
			for b.Loop() { // one pass: the metrics are the result, not the time
			}
			b.ReportMetric(float64(after-before)/float64(tc.keys), "heap-B/key")
			b.ReportMetric(float64(st.Bytes)/float64(tc.keys), "table-B/key")
		})
	}
}

func heapInUse() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// BenchmarkWindowCommand is one SW.CHECK / FW.CHECK through Dispatch on a
// hot key, mostly refused (100 per 60 s, a request a microsecond), without
// a network: the command layer's own cost.
func BenchmarkWindowCommand(b *testing.B) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"CL.THROTTLE", []string{"CL.THROTTLE", "k", "99", "100", "60"}},
		{"SW.CHECK", []string{"SW.CHECK", "k", "100", "60"}},
		{"SW.CHECK_EXACT", []string{"SW.CHECK", "k", "100", "60", "EXACT"}},
		{"FW.CHECK", []string{"FW.CHECK", "k", "100", "60"}},
	} {
		args := tc.args
		b.Run(tc.name, func(b *testing.B) {
			h := newWindowHarness(b, windowT0)
			bs := make([][]byte, len(args))
			for i, a := range args {
				bs[i] = []byte(a)
			}
			b.ReportAllocs()
			for b.Loop() {
				h.now += 1000
				h.ctx.Reset()
				h.ctx.W.Buf = h.ctx.W.Buf[:0]
				h.env.Table.Dispatch(&h.ctx, bs)
			}
		})
	}
}
