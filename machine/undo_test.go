package machine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
)

const undoRules = `domain: undo
descriptors:
  - key: f
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: s
    rate_limit: {unit: minute, requests_per_unit: 1000, sluice: {algorithm: sliding}}
  - key: x
    rate_limit: {unit: minute, requests_per_unit: 1000, sluice: {algorithm: sliding-exact}}
  - key: g
    rate_limit: {unit: second, requests_per_unit: 1000, sluice: {algorithm: gcra, burst: 1000}}
  - key: q
    rate_limit: {unit: day, requests_per_unit: 1000, sluice: {algorithm: quota}}
`

// A multi-limit check whose store fails at any position — a full slot or
// refused memory — leaves every limit as it was and journals nothing, and
// answers the error; without the failure the same check charges them all.
// The check mixes every algorithm, keys that exist (updated in place, a
// sliding log held as an object among them) and keys it creates.
func TestMultiCheckChargesNothingWhenAStoreFails(t *testing.T) {
	m := New(Options{})
	j := &journalLog{}
	m.SetDurability(j)
	if r := do(m, t0, "RL.RULES", "LOAD", "undo.yaml", undoRules); r != "+OK\r\n" {
		t.Fatal(r)
	}
	// Existing keys, one sliding log long enough to be held as an object.
	do(m, t0, "RL.CHECK", "undo", "DESCRIPTOR", "f", "a", "DESCRIPTOR", "x", "a", "DESCRIPTOR", "q", "a", "DESCRIPTOR", "g", "a")
	for i := range 200 {
		do(m, t0+int64(i)*1e6, "RL.CHECK", "undo", "DESCRIPTOR", "x", "long")
	}
	at := t0 + 1e9
	m.Advance(at) // the digest holds the applied instant: every check below applies at it
	for attempt, failure := range []error{keyspace.ErrSlotFull, keyspace.ErrNoMemory} {
		fresh := fmt.Sprintf("new%d", attempt)
		check := []string{"RL.CHECK", "undo", "DESCRIPTOR", "f", "a", "DESCRIPTOR", "s", fresh, "DESCRIPTOR", "x", "a",
			"DESCRIPTOR", "x", "long", "DESCRIPTOR", "x", fresh, "DESCRIPTOR", "g", "a", "DESCRIPTOR", "g", fresh,
			"DESCRIPTOR", "q", "a", "DESCRIPTOR", "q", fresh}
		const stores = 9
		for k := range stores {
			before, err := m.Digest()
			if err != nil {
				t.Fatal(err)
			}
			journaled := len(j.lines)
			tried := 0
			m.decide.Faults.Store = func(n int) error {
				tried = max(tried, n+1)
				if n == k {
					return fmt.Errorf("injected: %w", failure)
				}
				return nil
			}
			r := do(m, at, check...)
			m.decide.Faults.Store = nil
			if !strings.HasPrefix(r, "-") {
				t.Fatalf("store %d of %d failed (%v), yet the check answered %q", k, stores, failure, r)
			}
			if tried != k+1 {
				t.Fatalf("the failure at store %d was not the last store tried (%d)", k, tried)
			}
			after, err := m.Digest()
			if err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Fatalf("store %d of %d failed (%v): the limits changed", k, stores, failure)
			}
			if len(j.lines) != journaled {
				t.Fatalf("store %d of %d failed (%v): journaled %q", k, stores, failure, j.lines[journaled:])
			}
		}
		tried := 0
		m.decide.Faults.Store = func(n int) error { tried = max(tried, n+1); return nil }
		before, _ := m.Digest()
		if r := do(m, at, check...); !strings.HasPrefix(r, "*7\r\n:0\r\n") {
			t.Fatalf("without a failure: %q", r)
		}
		m.decide.Faults.Store = nil
		if after, _ := m.Digest(); after == before || tried != stores {
			t.Fatalf("without a failure: %d stores (want %d), state changed %v", tried, stores, after != before)
		}
		if n := j.count("quota "); n != 2*(attempt+1)+1 {
			t.Fatalf("quota changes journaled %d, want the two of each charged check and the first", n)
		}
	}
}

// A sliding log that outgrows its record moves out of it (a delete, then
// an insert): when that insert fails, the check charges nothing — the log
// is put back as it was — though the log is the check's only store, which
// a failed store otherwise needs no note for.
func TestSlidingLogMovingOutOfItsRecordFailsWhole(t *testing.T) {
	fresh := func() *Machine {
		m := New(Options{})
		do(m, t0, "RL.RULES", "LOAD", "undo.yaml", undoRules)
		return m
	}
	inline := func(m *Machine) bool {
		key := []byte(counterKey(m, "undo", "x", "edge"))
		s := m.keys.LockKey(key)
		defer s.Unlock()
		e, ok := s.Get(key, m.Applied())
		return ok && e.Inline()
	}
	// The number of charges after which the next one moves the log out.
	edge := -1
	for n := 1; n < 400 && edge < 0; n++ {
		m := fresh()
		for i := range n {
			do(m, t0+int64(i)*1e6, "RL.CHECK", "undo", "DESCRIPTOR", "x", "edge")
		}
		if !inline(m) {
			t.Fatalf("the log left its record after %d charges, before the probe", n)
		}
		do(m, t0+int64(n)*1e6, "RL.CHECK", "undo", "DESCRIPTOR", "x", "edge")
		if !inline(m) {
			edge = n
		}
	}
	if edge < 0 {
		t.Fatal("the log never left its record")
	}
	m := fresh()
	for i := range edge {
		do(m, t0+int64(i)*1e6, "RL.CHECK", "undo", "DESCRIPTOR", "x", "edge")
	}
	at := t0 + int64(edge)*1e6
	m.Advance(at)
	before, _ := m.Digest()
	m.decide.Faults.LogMove = func() error { return fmt.Errorf("injected: %w", keyspace.ErrSlotFull) }
	r := do(m, at, "RL.CHECK", "undo", "DESCRIPTOR", "x", "edge")
	m.decide.Faults.LogMove = nil
	if !strings.HasPrefix(r, "-") {
		t.Fatalf("the move's insert failed, yet the check answered %q", r)
	}
	if after, _ := m.Digest(); after != before || !inline(m) {
		t.Fatalf("a failed move changed the log (inline %v)", inline(m))
	}
}
