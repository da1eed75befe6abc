package machine

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/keyspace"
)

// Sweep keeps a record for grace after its key expired (read as absent
// all the same), and removes it after.
func TestSweepGrace(t *testing.T) {
	m := New(Options{})
	sec := int64(time.Second)
	do(m, t0, "CL.THROTTLE", "{g}a", "0", "1", "1")       // expires t0+1s
	do(m, t0+2*sec, "CL.THROTTLE", "{g}b", "0", "1", "1") // expires t0+3s
	m.Advance(t0 + 3*sec + sec/2)
	sweep := func(grace time.Duration) int {
		var cursor keyspace.SweepCursor
		_, removed := m.Sweep(&cursor, 1<<20, grace)
		return removed
	}
	if got := do(m, t0+3*sec+sec/2, "DBSIZE"); got != ":0\r\n" {
		t.Fatalf("DBSIZE %q with both keys expired", got)
	}
	if n := sweep(time.Second); n != 1 {
		t.Fatalf("a 1 s grace at t0+3.5s removed %d keys, want 1 (expired 2.5 s ago; the other 0.5 s ago)", n)
	}
	if n := sweep(time.Second); n != 0 {
		t.Fatalf("again: removed %d", n)
	}
	if n := sweep(0); n != 1 {
		t.Fatalf("no grace removed %d, want the last one", n)
	}
}
