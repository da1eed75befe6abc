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
// one RL.CHECK's (the target: at most twice).
func BenchmarkReserveSettlePair(b *testing.B) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "bench.yaml", benchRules)
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
		m.ApplyScratch(&sc, t0+int64(2*i), reserve, reserves[j], &w)
		m.ApplyScratch(&sc, t0+int64(2*i+1), settle, settles[j], &w)
	}
}
