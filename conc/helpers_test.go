package conc

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

const (
	second = int64(1_000_000_000)
	// t0 is an arbitrary fixed instant (2023-11-14T22:13:20Z).
	t0 = 1_700_000_000 * second
)

// checkInvariants fails t if l's internal representation is inconsistent.
func checkInvariants(t testing.TB, l *Leases) {
	t.Helper()
	if l.head < 0 || l.head > len(l.buf) {
		t.Fatalf("head %d outside buffer of %d", l.head, len(l.buf))
	}
	// Slots outside the leases must hold nothing, or they keep ids alive.
	for i, x := range l.buf[:l.head] {
		if x != (lease{}) {
			t.Fatalf("dead head slot %d not cleared: %+v", i, x)
		}
	}
	for i, x := range l.buf[len(l.buf):cap(l.buf)] {
		if x != (lease{}) {
			t.Fatalf("spare slot %d not cleared: %+v", len(l.buf)+i, x)
		}
	}
	if c := cap(l.buf); c > minShrinkCap && l.Len() < c/4 {
		t.Fatalf("capacity %d for %d leases", c, l.Len())
	}
	if len(l.all()) > MaxLimit {
		t.Fatalf("%d leases stored, above MaxLimit", len(l.all()))
	}
	seen := map[string]bool{}
	for i, x := range l.all() {
		if i > 0 && compareLease(l.all()[i-1], x) >= 0 {
			t.Fatalf("leases out of order at %d: %+v then %+v", i, l.all()[i-1], x)
		}
		if seen[x.id] {
			t.Fatalf("id %q stored twice", x.id)
		}
		seen[x.id] = true
		if x.fp != fingerprint([]byte(x.id)) {
			t.Fatalf("lease %q has a stale fingerprint", x.id)
		}
		if len(x.id) > MaxRequestIDLen {
			t.Fatalf("id of %d bytes stored", len(x.id))
		}
	}
	n := len(l.all())
	if n >= indexOn && l.index == nil {
		t.Fatalf("%d leases but no index", n)
	}
	if n <= indexOff && l.index != nil {
		t.Fatalf("%d leases but an index", n)
	}
	if l.index != nil {
		if len(l.index) != n {
			t.Fatalf("index has %d ids, %d leases stored", len(l.index), n)
		}
		for _, x := range l.all() {
			if e, ok := l.index[x.id]; !ok || e != x.expiry {
				t.Fatalf("index[%q] = %d,%v; lease expiry %d", x.id, e, ok, x.expiry)
			}
		}
	}
	if n > 0 && l.ExpireAt() != l.all()[n-1].expiry {
		t.Fatalf("ExpireAt %d, last expiry %d", l.ExpireAt(), l.all()[n-1].expiry)
	}
	if n == 0 && l.ExpireAt() != math.MinInt64 {
		t.Fatalf("empty ExpireAt %d", l.ExpireAt())
	}
}

// stored is l's leases as id → expiry, for comparing with a model.
func stored(l *Leases) map[string]int64 {
	m := make(map[string]int64, len(l.all()))
	for _, x := range l.all() {
		m[x.id] = x.expiry
	}
	return m
}

func id(s string) []byte { return []byte(s) }

func longID(n int) []byte { return []byte(strings.Repeat("x", n)) }

func appendUvarint(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }

func appendVarint(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }
