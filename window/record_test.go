package window

import (
	"bytes"
	"testing"
)

// The record encodings carry the same states as AppendBinary's, shorter.
func TestRecordRoundTrip(t *testing.T) {
	for _, s := range []CounterState{
		{Window: 1, Start: 0},
		{Window: 60 * sec, Start: t0 - t0%(60*sec), Prev: 17, Curr: 3},
		{Window: 3600 * sec, Start: t0 - t0%(3600*sec), Prev: 100, Curr: 1 << 40},
		{Window: MaxWindow, Start: MaxTime - MaxTime%MaxWindow, Prev: 1<<63 - 1, Curr: 1<<63 - 1},
		{Window: 1, Start: MaxTime},
	} {
		b := s.AppendRecord([]byte("prefix"))
		got, err := DecodeCounterRecord(b[len("prefix"):])
		if err != nil || got != s {
			t.Errorf("%+v: decoded %+v, %v", s, got, err)
		}
		if s.Window > 1 && len(b)-len("prefix") >= len(s.AppendBinary(nil)) {
			t.Errorf("%+v: record of %d bytes, no shorter than the snapshot's %d", s, len(b)-len("prefix"), len(s.AppendBinary(nil)))
		}
		f := FixedState{Window: s.Window, Start: s.Start, Count: s.Curr}
		gotF, err := DecodeFixedRecord(f.AppendRecord(nil))
		if err != nil || gotF != f {
			t.Errorf("%+v: decoded %+v, %v", f, gotF, err)
		}
	}
}

func TestRecordRejectsCorrupt(t *testing.T) {
	valid := CounterState{Window: 10, Start: 20, Prev: 1, Curr: 2}.AppendRecord(nil)
	for name, b := range map[string][]byte{
		"empty":         nil,
		"truncated":     valid[:len(valid)-1],
		"trailing":      append(bytes.Clone(valid), 0),
		"zero window":   {0, 2, 1, 2},
		"overflowing n": append(CounterState{Window: 1 << 40}.AppendRecord(nil)[:6], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0),
	} {
		if _, err := DecodeCounterRecord(b); err != ErrCorrupt {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	past := append(appendUvarints(nil, 1, uint64(MaxTime)+1), 0, 0)
	if _, err := DecodeCounterRecord(past); err != ErrCorrupt {
		t.Errorf("start past MaxTime: %v, want ErrCorrupt", err)
	}
	if _, err := DecodeFixedRecord(append(appendUvarints(nil, 7, uint64(MaxTime)/7+1), 0)); err != ErrCorrupt {
		t.Errorf("fixed start past MaxTime: %v, want ErrCorrupt", err)
	}
}

func FuzzDecodeCounterRecord(f *testing.F) {
	f.Add(CounterState{Window: 60 * sec, Start: t0 - t0%(60*sec), Prev: 17, Curr: 3}.AppendRecord(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeCounterRecord(b)
		if err != nil {
			return
		}
		again, err := DecodeCounterRecord(s.AppendRecord(nil))
		if err != nil || again != s {
			t.Fatalf("%+v re-encoded decodes as %+v, %v", s, again, err)
		}
		if c, err := DecodeCounter(s.AppendBinary(nil)); err != nil || c != s {
			t.Fatalf("%+v: snapshot encoding decodes as %+v, %v", s, c, err)
		}
	})
}

func appendUvarints(dst []byte, vs ...uint64) []byte {
	for _, v := range vs {
		for v >= 0x80 {
			dst = append(dst, byte(v)|0x80)
			v >>= 7
		}
		dst = append(dst, byte(v))
	}
	return dst
}
