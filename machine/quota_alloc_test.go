package machine

import (
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/resp"
)

// quotaArgs is QUOTA.CHECK on n keys with the options given.
func quotaArgs(n int, opts ...string) [][][]byte {
	args := make([][][]byte, n)
	for i := range args {
		a := [][]byte{[]byte("QUOTA.CHECK"), []byte("q:" + strconv.Itoa(i)), []byte("1000000"), []byte("MONTH")}
		for _, o := range opts {
			a = append(a, []byte(o))
		}
		args[i] = a
	}
	return args
}

// A quota lives in its record: checking an existing one, in UTC or in a
// named zone with an anchor, allocates nothing.
func TestQuotaCheckAllocatesNothing(t *testing.T) {
	for _, opts := range [][]string{nil, {"TZ", "America/New_York", "ANCHOR", "1700000000"}} {
		m := New(Options{})
		cmd := m.Lookup([]byte("quota.check"))
		args := quotaArgs(64, opts...)
		var w resp.Writer
		var sc Scratch
		for _, a := range args {
			m.ApplyScratch(&sc, t0, cmd, a, &w)
		}
		if r := string(w.Buf[:4]); r != "*5\r\n" {
			t.Fatalf("QUOTA.CHECK %v: %q", opts, w.Buf)
		}
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			w.Buf = w.Buf[:0]
			m.ApplyScratch(&sc, t0+int64(i), cmd, args[i%len(args)], &w)
			i++
		})
		if allocs != 0 {
			t.Errorf("QUOTA.CHECK %v on an existing key: %.1f allocations", opts, allocs)
		}
	}
}

// BenchmarkQuotaCheck is QUOTA.CHECK on existing keys.
func BenchmarkQuotaCheck(b *testing.B) {
	m := New(Options{})
	cmd := m.Lookup([]byte("quota.check"))
	args := quotaArgs(1024)
	benchApply(b, m, cmd, args)
}
