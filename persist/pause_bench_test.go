package persist_test

import (
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/persist"
	"github.com/sluice-rl/sluice/resp"
)

// BenchmarkSnapshotPause writes a point-in-time snapshot of 1M GCRA keys
// (SLUICE_BENCH_KEYS) while another goroutine applies CL.THROTTLE to
// random keys, as a replica applies its log during a Raft snapshot. It
// reports how long the snapshot took and the worst and 99th-percentile
// apply latency meanwhile: copy-on-write means an apply waits at most for
// one slot's encoding, never for the keyspace.
func BenchmarkSnapshotPause(b *testing.B) { snapshotPause(b, 1_000_000, "") }

// BenchmarkSnapshotPauseOneSlot is BenchmarkSnapshotPause with 300k keys
// in one slot (one hash tag), as every counter of one RL.CHECK domain is:
// the apply that first writes the slot waits for its whole encoding.
func BenchmarkSnapshotPauseOneSlot(b *testing.B) { snapshotPause(b, 300_000, "{domain}") }

func snapshotPause(b *testing.B, n int, tag string) {
	if v, err := strconv.Atoi(getenv("SLUICE_BENCH_KEYS")); err == nil && v > 0 {
		n = v
	}
	m := machine.New(machine.Options{})
	now := int64(4102444800) * 1e9
	w := resp.Writer{}
	args := [][]byte{[]byte("CL.THROTTLE"), nil, []byte("100"), []byte("1"), []byte("3600")}
	for i := range n {
		args[1] = strconv.AppendInt(append(args[1][:0], tag...), int64(i), 10)
		w.Buf = w.Buf[:0]
		m.ApplyArgs(now, args, &w)
	}
	for b.Loop() {
		f, err := m.Freeze(persist.EncodeSlotUnordered, persist.OrderRecords)
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan time.Duration)
		go func() {
			began := time.Now()
			if _, err := persist.WriteFrozen(io.Discard, f, persist.Header{}); err != nil {
				b.Error(err)
			}
			done <- time.Since(began)
		}()
		rng := rand.New(rand.NewPCG(1, 2))
		var lat []time.Duration
		var took time.Duration
	apply:
		for {
			select {
			case took = <-done:
				break apply
			default:
			}
			args[1] = strconv.AppendInt(append(args[1][:0], tag...), rng.Int64N(int64(n)), 10)
			w.Buf = w.Buf[:0]
			t := time.Now()
			m.ApplyArgs(now, args, &w)
			lat = append(lat, time.Since(t))
		}
		f.Release()
		slices.Sort(lat)
		b.ReportMetric(float64(took.Milliseconds()), "snapshot-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-apply-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-apply-µs")
		b.ReportMetric(float64(len(lat)), "applies-during")
	}
}

func getenv(k string) string { return os.Getenv(k) }
