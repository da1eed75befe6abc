package window

import (
	"errors"
	"testing"
)

// logFrom builds a log through Check alone, one admission per entry.
func logFrom(t testing.TB, p Params, adm ...admission) LogState {
	t.Helper()
	var s LogState
	exists := false
	for _, a := range adm {
		next, store, _, _, err := s.Check(exists, a.t, p, a.n)
		if err != nil || !store {
			t.Fatalf("admitting %+v: store=%v err=%v", a, store, err)
		}
		s, exists = next, true
	}
	return s
}

// entriesOf lists a log's entries, oldest first, from its fields.
func entriesOf(s LogState) []admission {
	var out []admission
	for j := s.head; j < len(s.times); j++ {
		out = append(out, admission{s.times[j], int64(s.cum[j]) - s.cumBefore(j)})
	}
	if s.tailUnits > 0 {
		out = append(out, admission{s.tail, s.tailUnits})
	}
	return out
}

func sameEntries(a, b []admission) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCounterRoundTrip(t *testing.T) {
	for _, s := range []CounterState{
		{Window: 1, Start: 0},
		{Window: 60 * sec, Start: t0, Prev: 17, Curr: 3},
		{Window: MaxWindow, Start: MaxTime - MaxTime%MaxWindow, Prev: 1<<63 - 1, Curr: 1<<63 - 1},
	} {
		b := s.AppendBinary([]byte("prefix"))
		got, err := DecodeCounter(b[len("prefix"):])
		if err != nil || got != s {
			t.Errorf("%+v: decoded %+v, %v", s, got, err)
		}
	}
}

func TestFixedRoundTrip(t *testing.T) {
	for _, s := range []FixedState{
		{Window: 1, Start: 0},
		{Window: 60 * sec, Start: t0, Count: 99},
		{Window: MaxWindow, Start: MaxTime - MaxTime%MaxWindow, Count: 1<<63 - 1},
	} {
		got, err := DecodeFixed(s.AppendBinary(nil))
		if err != nil || got != s {
			t.Errorf("%+v: decoded %+v, %v", s, got, err)
		}
	}
}

func TestLogRoundTrip(t *testing.T) {
	p := Params{Limit: MaxLogLimit, Window: MaxWindow}
	cases := [][]admission{
		nil,
		{{t0, 1}},
		{{0, 3}, {1, 1}, {1e18 - 1, MaxLogLimit - 4}}, // 0 is just inside the window
		{{MaxTime - MaxWindow + 1, 1}, {MaxTime, 2}},
		{{t0, 2}, {t0 + 5, 1}, {t0 + 1e9, 7}},
	}
	for _, adm := range cases {
		s := logFrom(t, p, adm...)
		b := s.AppendBinary(nil)
		got, err := DecodeLog(b)
		if err != nil || !sameEntries(entriesOf(got), adm) {
			t.Errorf("%v: decoded %v, %v", adm, entriesOf(got), err)
		}
	}
	// A pruned log encodes only what it holds.
	short := Params{Limit: 10, Window: 10}
	s := logFrom(t, short, admission{t0, 1}, admission{t0 + 5, 2}, admission{t0 + 12, 3})
	got, err := DecodeLog(s.AppendBinary(nil))
	if want := []admission{{t0 + 5, 2}, {t0 + 12, 3}}; err != nil || !sameEntries(entriesOf(got), want) {
		t.Errorf("pruned log decoded as %v, %v; want %v", entriesOf(got), err, want)
	}
}

func TestDecodeRejectsCorrupt(t *testing.T) {
	valid := CounterState{Window: 10, Start: 20, Prev: 1, Curr: 2}.AppendBinary(nil)
	for name, b := range map[string][]byte{
		"empty":        nil,
		"truncated":    valid[:len(valid)-1],
		"trailing":     append(append([]byte{}, valid...), 0),
		"zero window":  CounterState{Window: 0, Start: 0}.AppendBinary(nil),
		"unaligned":    CounterState{Window: 10, Start: 25}.AppendBinary(nil),
		"too late":     CounterState{Window: 1, Start: MaxTime + 1}.AppendBinary(nil),
		"long window":  CounterState{Window: MaxWindow + 1, Start: 0}.AppendBinary(nil),
		"varint > 2⁶³": {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0},
	} {
		if _, err := DecodeCounter(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("counter %s: %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := DecodeFixed(FixedState{Window: 10, Start: 25}.AppendBinary(nil)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("fixed unaligned: %v", err)
	}

	uv := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = appendUvarint(b, v)
		}
		return b
	}
	for name, b := range map[string][]byte{
		"empty":         nil,
		"count only":    uv(1),
		"trailing":      uv(0, 0),
		"repeated time": uv(2, 5, 0, 0, 0),
		"time too late": uv(1, uint64(MaxTime)+1, 0),
		"late by sum":   uv(2, uint64(MaxTime), 0, 1, 0),
		"too many":      uv(1, 5, uint64(MaxLogLimit)),
		"too many sum":  uv(2, 5, uint64(MaxLogLimit)-1, 1, 0),
		"count huge":    uv(uint64(MaxLogLimit) + 1),
		"count > bytes": uv(3, 1, 0, 1, 0),
	} {
		if _, err := DecodeLog(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("log %s: %v, want ErrCorrupt", name, err)
		}
	}
	if s, err := DecodeLog(uv(1, 5, uint64(MaxLogLimit)-1)); err != nil || s.Units() != MaxLogLimit {
		t.Errorf("log holding exactly MaxLogLimit: %v, %v", s.Units(), err)
	}
}

// fuzzDecoded exercises a decoded state: it re-encodes to something that
// decodes the same, and checks on it neither fail nor panic.
func fuzzDecoded[S checker[S]](t *testing.T, s S, decode func([]byte) (S, error), same func(a, b S) bool, window int64, now int64) {
	again, err := decode(s.AppendBinary(nil))
	if err != nil || !same(again, s) {
		t.Fatalf("re-encoding of a decoded state does not decode the same: %v", err)
	}
	for _, p := range []Params{{Limit: 1, Window: window}, {Limit: MaxLogLimit, Window: window}, {Limit: 3, Window: 7}} {
		for _, cost := range []int64{0, 1, 5} {
			if _, _, _, _, err := s.Check(true, now, p, cost); err != nil {
				t.Fatalf("check on a decoded state: %v", err)
			}
		}
	}
}

func FuzzDecodeCounter(f *testing.F) {
	f.Add(CounterState{Window: 60 * sec, Start: t0, Prev: 17, Curr: 3}.AppendBinary(nil))
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeCounter(b)
		if err != nil {
			return
		}
		fuzzDecoded(t, s, DecodeCounter, func(a, b CounterState) bool { return a == b }, s.Window, s.Start)
	})
}

func FuzzDecodeFixed(f *testing.F) {
	f.Add(FixedState{Window: 60 * sec, Start: t0, Count: 3}.AppendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeFixed(b)
		if err != nil {
			return
		}
		fuzzDecoded(t, s, DecodeFixed, func(a, b FixedState) bool { return a == b }, s.Window, s.Start)
	})
}

func FuzzDecodeLog(f *testing.F) {
	p := Params{Limit: 100, Window: 60 * sec}
	f.Add(logFrom(f, p, admission{t0, 1}, admission{t0 + 1, 5}, admission{t0 + 1e9, 2}).AppendBinary(nil))
	f.Add([]byte{0})
	f.Add([]byte{2, 1, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeLog(b)
		if err != nil {
			return
		}
		if s.Units() > MaxLogLimit || s.Entries() > int(MaxLogLimit) {
			t.Fatalf("decoded %d units in %d entries", s.Units(), s.Entries())
		}
		same := func(a, b LogState) bool { return sameEntries(entriesOf(a), entriesOf(b)) }
		fuzzDecoded(t, s, DecodeLog, same, 60*sec, s.tail)
		fuzzDecoded(t, s, DecodeLog, same, 1, s.tail+1)
	})
}

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
