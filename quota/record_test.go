package quota

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	states := sampleStates(t)
	// A period off whole seconds (not in today's tz database, but the
	// encoding must not depend on it).
	odd := states[0]
	odd.Start, odd.End = odd.Start+1, odd.End+7
	states = append(states, odd)
	for _, st := range states {
		b, err := st.AppendRecord([]byte{0xAA})
		if err != nil || b[0] != 0xAA {
			t.Fatalf("AppendRecord: %v, or it overwrote dst", err)
		}
		got, err := DecodeRecord(b[1:], LoadZone)
		if err != nil || !sameState(got, st) {
			t.Fatalf("round trip %+v → %+v, %v", st, got, err)
		}
		// Snapshots keep the other encoding: the same bytes by either way.
		snap, err := RecordToBinary([]byte{0xBB}, b[1:])
		if err != nil || !bytes.Equal(snap[1:], st.AppendBinary(nil)) || snap[0] != 0xBB {
			t.Errorf("%+v: RecordToBinary = %x, %v; want %x", st, snap, err, st.AppendBinary(nil))
		}
		if st.Start%nsPerSecond == 0 && len(b)-1 > len(st.AppendBinary(nil))-len(st.Schedule.Zone)-6 {
			t.Errorf("%+v: record of %d bytes against the snapshot's %d", st, len(b)-1, len(st.AppendBinary(nil)))
		}
		for n := range len(b) - 1 {
			if _, err := DecodeRecord(b[1:1+n], LoadZone); err == nil {
				t.Errorf("truncated to %d bytes decoded", n)
			}
			if _, err := RecordToBinary(nil, b[1:1+n]); err == nil {
				t.Errorf("truncated to %d bytes converted", n)
			}
		}
		if _, err := DecodeRecord(append(b[1:len(b):len(b)], 0), LoadZone); !errors.Is(err, ErrCorrupt) {
			t.Errorf("trailing byte err = %v", err)
		}
	}
	if _, err := (State{Schedule: Schedule{Period: Day, Zone: "Mars/Olympus"}, End: 1}).AppendRecord(nil); !errors.Is(err, ErrUnknownZone) {
		t.Errorf("a zone outside the database: %v", err)
	}
}

// The zone numbers: UTC first, every zone of the database numbered once.
func TestZoneNumbers(t *testing.T) {
	if zoneNames[0] != "UTC" || zoneIndex["UTC"] != 0 {
		t.Fatalf("UTC is %q at 0, index %d", zoneNames[0], zoneIndex["UTC"])
	}
	for name := range tzfiles {
		if i, ok := zoneIndex[name]; !ok || zoneNames[i] != name {
			t.Fatalf("%s: number %d, ok=%v", name, i, ok)
		}
	}
	if len(zoneNames) != len(zoneIndex) || len(zoneNames) < 300 {
		t.Fatalf("%d names, %d numbers", len(zoneNames), len(zoneIndex))
	}
}

func TestDecodeRecordCorrupt(t *testing.T) {
	st := sampleStates(t)[0]
	good, err := st.AppendRecord(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeRecord(good, LoadZone); err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, b := range map[string][]byte{
		"empty":         nil,
		"period 0":      mutate(func(b []byte) []byte { b[0] &^= 0x3f; return b }),
		"unknown zone":  append(binary.AppendUvarint([]byte{good[0]}, uint64(len(zoneNames))), good[2:]...), // good's zone is UTC, 0
		"seconds past":  append([]byte{byte(Day) | inSecondsBit, 0, 1, 0}, bounds(math.MaxInt64/nsPerSecond+1, 1)...),
		"span past":     append([]byte{byte(Day) | inSecondsBit, 0, 1, 0}, bounds(0, uint64(math.MaxInt64/nsPerSecond+1))...),
		"zero span":     append([]byte{byte(Day), 0, 1, 0}, bounds(0, 0)...),
		"end overflows": append([]byte{byte(Day), 0, 1, 0}, bounds(math.MaxInt64-5, 20)...),
	} {
		if _, err := DecodeRecord(b, LoadZone); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
		if _, err := RecordToBinary(nil, b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: RecordToBinary err = %v, want ErrCorrupt", name, err)
		}
	}
}

// bounds is a record's start (varint) and span (uvarint).
func bounds(start int64, span uint64) []byte {
	return binary.AppendUvarint(binary.AppendVarint(nil, start), span)
}
