package machine

import (
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/resp"
)

const benchRules = `domain: bench
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: minute, requests_per_unit: 1000}
  - key: endpoint
    rate_limit: {name: per-endpoint, unit: second, requests_per_unit: 100000}
`

// BenchmarkRLCheckTwoDescriptors is RL.CHECK with two descriptors on
// random users, beside BenchmarkThrottle: the policy layer's own cost.
func BenchmarkRLCheckTwoDescriptors(b *testing.B) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "bench.yaml", benchRules)
	args := make([][][]byte, 1024)
	for i := range args {
		args[i] = [][]byte{[]byte("RL.CHECK"), []byte("bench"), []byte("DESCRIPTOR"), []byte("user"),
			[]byte("u:" + strconv.Itoa(i*7919%100000)), []byte("DESCRIPTOR"), []byte("endpoint"), []byte("/e:" + strconv.Itoa(i%50))}
	}
	cmd := m.Lookup([]byte("rl.check"))
	benchApply(b, m, cmd, args)
}

func BenchmarkThrottle(b *testing.B) {
	m := New(Options{})
	args := make([][][]byte, 1024)
	for i := range args {
		args[i] = [][]byte{[]byte("CL.THROTTLE"), []byte("key:" + strconv.Itoa(i*7919%100000)), []byte("100"), []byte("10"), []byte("1"), []byte("1")}
	}
	cmd := m.Lookup([]byte("cl.throttle"))
	benchApply(b, m, cmd, args)
}

// benchApply applies cmd with each of args in turn, at instants a
// nanosecond apart, with a kept scratch as a connection keeps one.
func benchApply(b *testing.B, m *Machine, cmd *Command, args [][][]byte) {
	var w resp.Writer
	var sc Scratch
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w.Buf = w.Buf[:0]
		m.ApplyScratch(&sc, t0+int64(i), cmd, args[i%len(args)], &w)
	}
}

// BenchmarkShouldRateLimitTwoDescriptors is RL.SHOULDRATELIMIT with the
// descriptors of BenchmarkRLCheckTwoDescriptors: Envoy's door's own cost.
func BenchmarkShouldRateLimitTwoDescriptors(b *testing.B) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "bench.yaml", benchRules)
	args := make([][][]byte, 1024)
	for i := range args {
		args[i] = [][]byte{[]byte("RL.SHOULDRATELIMIT"), []byte("bench"), []byte("1"),
			[]byte("1"), []byte("-"), []byte("-"), []byte("-"), []byte("user"), []byte("u:" + strconv.Itoa(i*7919%100000)),
			[]byte("1"), []byte("-"), []byte("-"), []byte("-"), []byte("endpoint"), []byte("/e:" + strconv.Itoa(i%50))}
	}
	cmd := m.Lookup([]byte("rl.shouldratelimit"))
	benchApply(b, m, cmd, args)
}

// BenchmarkReserveSettlePair is RL.RESERVE then RL.SETTLE on the rules of
// BenchmarkRLCheckTwoDescriptors: one reservation's whole cost, against
// one RL.CHECK's (the target: at most twice). One record, the
// group's slots never move.
func BenchmarkReserveSettlePair(b *testing.B) { benchReservePairs(b, false) }

// BenchmarkReserveSettlePairSharded is the same pair in a group of a
// sharded cluster, whose reservations are a part in each counter's slot
// (in its record) and a head, so they move with their slots.
func BenchmarkReserveSettlePairSharded(b *testing.B) { benchReservePairs(b, true) }

func benchReservePairs(b *testing.B, sharded bool) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "bench.yaml", benchRules)
	if sharded {
		do(m, t0, "SLUICE.OWN", "1", "0-16383")
	}
	reserve := m.Lookup([]byte("rl.reserve"))
	settle := m.Lookup([]byte("rl.settle"))
	reserves := make([][][]byte, 1024)
	settles := make([][][]byte, 1024)
	for i := range reserves {
		id := []byte("req-" + strconv.Itoa(i))
		reserves[i] = [][]byte{[]byte("RL.RESERVE"), []byte("bench"), id, []byte("60"), []byte("COST"), []byte("3"),
			[]byte("DESCRIPTOR"), []byte("user"), []byte("u:" + strconv.Itoa(i*7919%100000)), []byte("DESCRIPTOR"), []byte("endpoint"), []byte("/e")}
		settles[i] = [][]byte{[]byte("RL.SETTLE"), []byte("bench"), id, []byte("1")}
	}
	var w resp.Writer
	var sc Scratch
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j := i % len(reserves)
		w.Buf = w.Buf[:0]
		// 100 µs between pairs: within every limit (a refused reserve
		// holds nothing, and would measure something else).
		at := t0 + int64(i)*100_000
		m.ApplyScratch(&sc, at, reserve, reserves[j], &w)
		if w.Buf[5] != '0' {
			b.Fatalf("refused: %q", w.Buf)
		}
		w.Buf = w.Buf[:0]
		m.ApplyScratch(&sc, at+1, settle, settles[j], &w)
		if w.Buf[0] != '*' {
			b.Fatalf("settle: %q", w.Buf)
		}
	}
}
