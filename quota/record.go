package quota

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// The record encoding: what a quota key's keyspace record holds in memory.
// Snapshots, the quota store's journal and DEBUG DIGEST keep AppendBinary's
// encoding (the machine converts, RecordToBinary), so this one can change
// without a format change. It differs in two ways, worth half of a state's
// bytes:
//
//   - the zone is its number in the compiled-in tz database (zoneNames):
//     1 or 2 bytes instead of its name and length, 4 bytes for "UTC";
//   - the period's bounds are in seconds when they fall on whole seconds,
//     as calendar periods do in every zone of the tz database today (5 and
//     3 bytes for a month instead of 9 and 8).
//
// flags byte (period; hasAnchorBit; inSecondsBit), uvarint zone number,
// uvarint anchor (only if anchored), uvarint limit, uvarint used, varint
// start, uvarint end-start, the last two in seconds when inSecondsBit.
const inSecondsBit = 0x40

// AppendRecord appends the record encoding of st to dst. It fails only for
// a zone the compiled-in database lacks (a schedule from LoadZone never
// has one).
func (st State) AppendRecord(dst []byte) ([]byte, error) {
	zone, ok := zoneIndex[st.Schedule.Zone]
	if !ok {
		return dst, fmt.Errorf("%w: %q", ErrUnknownZone, st.Schedule.Zone)
	}
	b := byte(st.Schedule.Period)
	if st.Schedule.HasAnchor {
		b |= hasAnchorBit
	}
	start, span := st.Start, st.End-st.Start
	if start%nsPerSecond == 0 && span%nsPerSecond == 0 {
		b |= inSecondsBit
		start, span = start/nsPerSecond, span/nsPerSecond
	}
	dst = append(dst, b)
	dst = binary.AppendUvarint(dst, zone)
	if st.Schedule.HasAnchor {
		dst = binary.AppendUvarint(dst, uint64(st.Schedule.Anchor))
	}
	dst = binary.AppendUvarint(dst, uint64(st.Limit))
	dst = binary.AppendUvarint(dst, uint64(st.Used))
	dst = binary.AppendVarint(dst, start)
	return binary.AppendUvarint(dst, uint64(span)), nil
}

// record is a record's fields, read but not yet checked as a schedule.
type record struct {
	period      Period
	zone        string
	anchor      int64
	hasAnchor   bool
	limit, used int64
	start, span int64
}

func readRecord(b []byte) (record, error) {
	d := decoder{b: b}
	flags := d.byte()
	zi := d.uvarint(uint64(len(zoneNames) - 1))
	r := record{hasAnchor: flags&hasAnchorBit != 0}
	if r.hasAnchor {
		r.anchor = int64(d.uvarint(uint64(MaxInstant)))
	}
	r.limit = int64(d.uvarint(math.MaxInt64))
	r.used = int64(d.uvarint(math.MaxInt64))
	r.start = d.varint()
	r.span = int64(d.uvarint(math.MaxInt64))
	if flags&inSecondsBit != 0 {
		const most = math.MaxInt64 / nsPerSecond
		if r.start > most || r.start < -most || r.span > most {
			return record{}, ErrCorrupt
		}
		r.start, r.span = r.start*nsPerSecond, r.span*nsPerSecond
	}
	if d.bad || len(d.b) != 0 || r.span == 0 || r.start > math.MaxInt64-r.span {
		return record{}, ErrCorrupt
	}
	r.period = Period(flags &^ (hasAnchorBit | inSecondsBit))
	if !r.period.Valid() {
		return record{}, ErrCorrupt
	}
	r.zone = zoneNames[zi]
	return r, nil
}

// DecodeRecord decodes AppendRecord's output, loading its zone by name
// with load (a cache around LoadZone). Malformed input yields ErrCorrupt.
// It allocates nothing when load does not.
func DecodeRecord(b []byte, load func(name string) (*time.Location, error)) (State, error) {
	r, err := readRecord(b)
	if err != nil {
		return State{}, err
	}
	loc, err := load(r.zone)
	if err != nil {
		return State{}, fmt.Errorf("decode record: %w", err)
	}
	sch, err := NewScheduleIn(r.period, r.anchor, r.hasAnchor, loc)
	if err != nil {
		return State{}, fmt.Errorf("decode record: %w", err)
	}
	return State{Schedule: sch, Limit: r.limit, Used: r.used, Start: r.start, End: r.start + r.span}, nil
}

// RecordToBinary appends the AppendBinary encoding of the state record b
// holds, without loading its zone (a snapshot converts every quota key).
func RecordToBinary(dst, b []byte) ([]byte, error) {
	r, err := readRecord(b)
	if err != nil {
		return dst, err
	}
	return State{
		Schedule: Schedule{Period: r.period, Anchor: r.anchor, HasAnchor: r.hasAnchor, Zone: r.zone},
		Limit:    r.limit, Used: r.used, Start: r.start, End: r.start + r.span,
	}.AppendBinary(dst), nil
}
