package quota

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// maxZoneName bounds the stored zone name (the longest IANA name is about 32
// bytes) so a corrupt length cannot make the decoder allocate much.
const maxZoneName = 64

// hasAnchorBit marks an anchored schedule in the period byte.
const hasAnchorBit = 0x80

// AppendBinary appends the snapshot encoding: period byte (top bit: has
// anchor), uvarint zone length and name, uvarint anchor (only if anchored),
// uvarint limit, uvarint used, varint start, uvarint end-start.
func (st State) AppendBinary(dst []byte) []byte {
	b := byte(st.Schedule.Period)
	if st.Schedule.HasAnchor {
		b |= hasAnchorBit
	}
	dst = append(dst, b)
	dst = binary.AppendUvarint(dst, uint64(len(st.Schedule.Zone)))
	dst = append(dst, st.Schedule.Zone...)
	if st.Schedule.HasAnchor {
		dst = binary.AppendUvarint(dst, uint64(st.Schedule.Anchor))
	}
	dst = binary.AppendUvarint(dst, uint64(st.Limit))
	dst = binary.AppendUvarint(dst, uint64(st.Used))
	dst = binary.AppendVarint(dst, st.Start)
	return binary.AppendUvarint(dst, uint64(st.End-st.Start))
}

// DecodeState decodes AppendBinary's output, loading the zone with LoadZone.
// A zone this binary's tz database lacks yields ErrUnknownZone; any other
// malformed input yields ErrCorrupt.
func DecodeState(b []byte) (State, error) { return DecodeStateWith(b, LoadZone) }

// DecodeStateWith is DecodeState with a caller's zone loader (e.g. a cache
// around LoadZone, when restoring many keys).
func DecodeStateWith(b []byte, load func(name string) (*time.Location, error)) (State, error) {
	return DecodeStateIn(b, func(name []byte) (*time.Location, error) { return load(string(name)) })
}

// DecodeStateIn is DecodeStateWith with a loader given the zone's name as
// the encoding's bytes, so that a cache can look it up without copying it:
// a state decoded this way allocates nothing (its Zone is the location's
// own name).
func DecodeStateIn(b []byte, load func(name []byte) (*time.Location, error)) (State, error) {
	d := decoder{b: b}
	flags := d.byte()
	zoneLen := d.uvarint(maxZoneName)
	zone := d.bytes(int(zoneLen))
	var anchor int64
	hasAnchor := flags&hasAnchorBit != 0
	if hasAnchor {
		anchor = int64(d.uvarint(uint64(MaxInstant)))
	}
	limit := int64(d.uvarint(math.MaxInt64))
	used := int64(d.uvarint(math.MaxInt64))
	start := d.varint()
	span := int64(d.uvarint(math.MaxInt64))
	if d.bad || len(d.b) != 0 {
		return State{}, ErrCorrupt
	}
	if span == 0 || start > math.MaxInt64-span {
		return State{}, ErrCorrupt
	}
	p := Period(flags &^ hasAnchorBit)
	if !p.Valid() {
		return State{}, ErrCorrupt
	}
	loc, err := load(zone)
	if err != nil {
		return State{}, fmt.Errorf("decode state: %w", err)
	}
	sch, err := NewScheduleIn(p, anchor, hasAnchor, loc)
	if err != nil {
		return State{}, fmt.Errorf("decode state: %w", err)
	}
	return State{Schedule: sch, Limit: limit, Used: used, Start: start, End: start + span}, nil
}

// decoder reads fields in order, remembering the first failure.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) byte() byte {
	if d.bad || len(d.b) == 0 {
		d.bad = true
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) bytes(n int) []byte {
	if d.bad || n > len(d.b) {
		d.bad = true
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint(maxValue uint64) uint64 {
	if d.bad {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > maxValue {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.bad {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}
