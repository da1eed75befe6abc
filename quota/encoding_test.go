package quota

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func sampleStates(tb testing.TB) []State {
	var out []State
	for _, tc := range []struct {
		p      Period
		anchor int64
		zone   string
		limit  int64
		used   int64
		now    int64
	}{
		{Day, none, "UTC", 100, 3, utc(2024, 5, 17, 10, 0, 0, 0)},
		{Month, utc(2023, 1, 31, 10, 0, 0, 0), "America/New_York", 1_000_000, 999_999, utc(2024, 3, 10, 7, 0, 0, 0)},
		{Year, utc(2024, 2, 29, 12, 0, 0, 0), "Europe/Berlin", math.MaxInt64, math.MaxInt64, utc(2025, 3, 1, 0, 0, 0, 0)},
		{Year, none, "America/Los_Angeles", 0, 0, 0}, // starts before 1970: negative Start
		{Hour, MaxInstant, "Asia/Kolkata", 5, 1, MaxInstant},
		{Week, 0, "Pacific/Chatham", 7, 7, utc(2030, 1, 1, 0, 0, 0, 0)},
	} {
		sch := mustSchedule(tb, tc.p, tc.anchor, tc.zone)
		start, end, err := sch.Bounds(tc.now)
		if err != nil {
			tb.Fatal(err)
		}
		st := State{Schedule: sch, Limit: tc.limit, Used: tc.used, Start: start, End: end}
		out = append(out, st)
	}
	return out
}

func TestEncodingRoundTrip(t *testing.T) {
	for _, st := range sampleStates(t) {
		b := st.AppendBinary([]byte{0xAA})
		if b[0] != 0xAA {
			t.Fatal("AppendBinary overwrote dst")
		}
		got, err := DecodeState(b[1:])
		if err != nil || !sameState(got, st) {
			t.Fatalf("round trip %+v → %+v, %v", st, got, err)
		}
		// The decoded schedule is usable: its zone was loaded.
		if _, err := got.Get(min(max(st.Start, 0), MaxInstant)); err != nil {
			t.Errorf("decoded state Get: %v", err)
		}
		if again := got.AppendBinary(nil); !bytes.Equal(again, b[1:]) {
			t.Errorf("re-encoding differs: %x vs %x", again, b[1:])
		}
		for n := range len(b) - 1 {
			if _, err := DecodeState(b[1 : 1+n]); err == nil {
				t.Errorf("truncated to %d bytes decoded", n)
			}
		}
		if _, err := DecodeState(append(b[1:len(b):len(b)], 0)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("trailing byte err = %v", err)
		}
	}
}

func TestDecodeCorrupt(t *testing.T) {
	st := sampleStates(t)[0]
	good := st.AppendBinary(nil)
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"empty":        {nil, ErrCorrupt},
		"period 0":     {mutate(func(b []byte) []byte { b[0] = 0; return b }), ErrCorrupt},
		"period 6":     {mutate(func(b []byte) []byte { b[0] = 6; return b }), ErrCorrupt},
		"unknown zone": {mutate(func(b []byte) []byte { copy(b[2:5], "XYZ"); return b }), ErrUnknownZone},
		"Local zone": {append(append([]byte{byte(Day), 5}, "Local"...), good[2+len("UTC"):]...),
			ErrUnknownZone},
		"empty period": {State{Schedule: st.Schedule, End: st.Start, Start: st.Start}.AppendBinary(nil), ErrCorrupt},
		"long zone":    {append([]byte{byte(Day), 200, 1}, make([]byte, 300)...), ErrCorrupt},
		"overlong varint": {append(good[:len(good)-1:len(good)-1], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
			ErrCorrupt},
	} {
		if _, err := DecodeState(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	for _, st := range sampleStates(&testing.T{}) {
		f.Add(st.AppendBinary(nil))
	}
	f.Add([]byte{byte(Month) | hasAnchorBit, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := DecodeState(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownZone) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		again, err := DecodeState(st.AppendBinary(nil))
		if err != nil || !sameState(again, st) {
			t.Fatalf("re-decode %+v → %+v, %v", st, again, err)
		}
	})
}
