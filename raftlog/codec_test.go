package raftlog

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestRecordRoundTrip(t *testing.T) {
	cases := []*raft.Log{
		{},
		{Index: 1, Term: 1, Type: raft.LogNoop},
		{Index: 1<<64 - 1, Term: 1<<64 - 1, Type: raft.LogConfiguration, Data: []byte("conf"), Extensions: []byte("ext")},
		// Times outside UnixNano's range and before 1970 survive.
		{Index: 7, AppendedAt: time.Date(2500, 1, 1, 0, 0, 0, 999_999_999, time.UTC)},
		{Index: 8, AppendedAt: time.Date(1600, 6, 1, 0, 0, 0, 1, time.UTC)},
		entry(12345),
	}
	for _, want := range cases {
		var got raft.Log
		if err := decodeRecord(appendRecord(nil, want), &got); err != nil {
			t.Fatalf("decode(%+v): %v", *want, err)
		}
		if !sameLog(&got, want) || got.AppendedAt.IsZero() != want.AppendedAt.IsZero() {
			t.Fatalf("round trip of %+v = %+v", *want, got)
		}
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	good := appendRecord(nil, entry(10))
	bad := map[string][]byte{
		"empty":          nil,
		"version":        append([]byte{2}, good[1:]...),
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte(nil), good...), 0),
		// Index 1, term 0, type 0, flags 0x80, no data, no extensions.
		"unknown flag": {recordVersion, 1, 0, 0, 0x80, 0, 0},
	}
	bad["nanoseconds"] = []byte{recordVersion, 1, 0, 0, flagAppendedAt, 0, 0x80, 0x94, 0xeb, 0xdc, 0x03, 0, 0}
	bad["data longer than the record"] = []byte{recordVersion, 1, 0, 0, 0, 5, 'a', 0}
	for name, b := range bad {
		var l raft.Log
		if err := decodeRecord(b, &l); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decode = %v, want ErrCorrupt", name, err)
		}
	}
}

// FuzzDecodeRecord: no input panics, every rejection wraps ErrCorrupt, and
// whatever decodes survives a re-encode and decode unchanged.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, entry(10)))
	f.Add(appendRecord(nil, entry(11)))
	f.Add(appendRecord(nil, &raft.Log{}))
	f.Add([]byte{recordVersion, 1, 0, 0, 0x80, 0, 0})
	f.Add([]byte{recordVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := decodeRecord(b, &l); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		var l2 raft.Log
		if err := decodeRecord(appendRecord(nil, &l), &l2); err != nil || !sameLog(&l, &l2) {
			t.Fatalf("re-encoding of %+v decodes to %+v, %v", l, l2, err)
		}
	})
}
