package conc

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"testing"
)

// build makes a state from (expiry, id) pairs. It stores them directly:
// Acquire cannot reach expiries a full int64 range apart.
func build(t testing.TB, pairs ...any) Leases {
	t.Helper()
	var l Leases
	for i := 0; i < len(pairs); i += 2 {
		expiry, s := pairs[i].(int64), pairs[i+1].(string)
		l.insert(id(s), fingerprint(id(s)), expiry)
	}
	checkInvariants(t, &l)
	return l
}

func roundTripStates(t testing.TB) map[string]Leases {
	many := []any{}
	for i := range 3 * indexOn {
		many = append(many, t0+int64(i%7)*second, fmt.Sprintf("id-%03d", i))
	}
	return map[string]Leases{
		"empty":          {},
		"one":            build(t, t0, "a"),
		"empty id":       build(t, t0, ""),
		"longest id":     build(t, t0, string(longID(MaxRequestIDLen))),
		"extreme expiry": build(t, int64(math.MinInt64+1), "lo", int64(-1), "neg", int64(math.MaxInt64), "hi"),
		"equal expiries": build(t, t0, "b", t0, "a", t0, "c"),
		"many, indexed":  build(t, many...),
	}
}

func TestRoundTrip(t *testing.T) {
	for name, l := range roundTripStates(t) {
		t.Run(name, func(t *testing.T) {
			prefix := []byte("prefix")
			enc := l.AppendBinary(bytes.Clone(prefix))
			if !bytes.HasPrefix(enc, prefix) {
				t.Fatal("AppendBinary overwrote dst")
			}
			got, err := DecodeLeases(enc[len(prefix):])
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			checkInvariants(t, &got)
			if !maps.Equal(stored(&got), stored(&l)) {
				t.Fatalf("decoded %v, want %v", stored(&got), stored(&l))
			}
			if again := got.AppendBinary(nil); !bytes.Equal(again, enc[len(prefix):]) {
				t.Fatal("re-encoding differs")
			}
		})
	}
}

func TestEncodingIsCompact(t *testing.T) {
	// Count, then expiry and id length per lease: 1 + 9 + 1 + 1 for the
	// first (zigzag t0 needs 9 bytes), 1 + 1 + 1 for each later lease taken
	// within 127 ns of the one before.
	l := build(t, t0, "a", t0+5, "b", t0+100, "c")
	if got, want := len(l.AppendBinary(nil)), 1+(9+1+1)+2*(1+1+1); got != want {
		t.Fatalf("encoding is %d bytes, want %d", got, want)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := build(t, t0, "a", t0+1, "b")
	enc := good.AppendBinary(nil)
	for n := range len(enc) {
		if _, err := DecodeLeases(enc[:n]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated to %d bytes: got %v", n, err)
		}
	}
	lease := func(dst []byte, gap uint64, s string) []byte {
		dst = appendUvarint(dst, gap)
		dst = appendUvarint(dst, uint64(len(s)))
		return append(dst, s...)
	}
	first := func(expiry int64, s string) []byte {
		return append(appendVarint(nil, expiry), append(appendUvarint(nil, uint64(len(s))), s...)...)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := map[string][]byte{
		"trailing byte":               append(bytes.Clone(enc), 0),
		"count above max":             cat(appendUvarint(nil, MaxLimit+1), bytes.Repeat([]byte{0}, 2*(MaxLimit+1))),
		"count past input":            cat(appendUvarint(nil, 3), first(t0, "a")),
		"id too long":                 cat([]byte{1}, first(t0, string(longID(MaxRequestIDLen+1)))),
		"same expiry, ids descending": cat([]byte{2}, first(t0, "b"), lease(nil, 0, "a")),
		"same lease twice":            cat([]byte{2}, first(t0, "a"), lease(nil, 0, "a")),
		"id repeated later":           cat([]byte{3}, first(t0, "a"), lease(nil, 1, "b"), lease(nil, 1, "a")),
		"expiry overflows":            cat([]byte{2}, first(math.MaxInt64-1, "a"), lease(nil, 2, "b")),
		"overflow from negative":      cat([]byte{2}, first(-1, "a"), lease(nil, math.MaxUint64, "b")),
		"bad varint":                  {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, b := range tests {
		if _, err := DecodeLeases(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
	// The largest gap that still fits is accepted.
	edge := cat([]byte{2}, first(-1, "a"), lease(nil, uint64(math.MaxInt64)+1, "b"))
	l, err := DecodeLeases(edge)
	if err != nil || l.ExpireAt() != math.MaxInt64 {
		t.Fatalf("gap to MaxInt64: %v, ExpireAt %d", err, l.ExpireAt())
	}
}

func FuzzDecodeLeases(f *testing.F) {
	for _, l := range roundTripStates(f) {
		f.Add(l.AppendBinary(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{2, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeLeases(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		checkInvariants(t, &l)
		enc := l.AppendBinary(nil)
		again, err := DecodeLeases(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !maps.Equal(stored(&again), stored(&l)) {
			t.Fatal("round trip changed the leases")
		}
		// A decoded state must stay usable.
		l.Acquire(0, 1, 1, id("x"))
		checkInvariants(t, &l)
	})
}
