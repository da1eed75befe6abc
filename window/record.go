package window

import (
	"encoding/binary"
	"math/bits"
)

// Record encodings: what a sliding-counter or fixed-window key's keyspace
// record holds in memory. Snapshots and DEBUG DIGEST keep AppendBinary's
// encoding (the machine converts), so this one can change without a
// snapshot format change. Start is a multiple of Window, so it is stored
// as a count of windows: 3 bytes instead of 9 for an hour's window at
// today's instants, about 10% of a key's memory.
//
//	CounterState: uvarint Window, uvarint Start/Window, uvarint Prev, uvarint Curr
//	FixedState:   uvarint Window, uvarint Start/Window, uvarint Count

// AppendRecord appends the record encoding of s, a valid state, to dst.
func (s CounterState) AppendRecord(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(s.Window))
	dst = binary.AppendUvarint(dst, uint64(windowsIn(s.Start, s.Window)))
	dst = binary.AppendUvarint(dst, uint64(s.Prev))
	return binary.AppendUvarint(dst, uint64(s.Curr))
}

// DecodeCounterRecord decodes what CounterState.AppendRecord wrote; it
// returns ErrCorrupt for anything else.
func DecodeCounterRecord(b []byte) (CounterState, error) {
	d := decoder{b: b}
	w := d.int64()
	s := CounterState{Window: w, Start: d.start(w), Prev: d.int64(), Curr: d.int64()}
	if !d.done() || !s.valid() {
		return CounterState{}, ErrCorrupt
	}
	return s, nil
}

// AppendRecord appends the record encoding of s, a valid state, to dst.
func (s FixedState) AppendRecord(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(s.Window))
	dst = binary.AppendUvarint(dst, uint64(windowsIn(s.Start, s.Window)))
	return binary.AppendUvarint(dst, uint64(s.Count))
}

// DecodeFixedRecord decodes what FixedState.AppendRecord wrote; it
// returns ErrCorrupt for anything else.
func DecodeFixedRecord(b []byte) (FixedState, error) {
	d := decoder{b: b}
	w := d.int64()
	s := FixedState{Window: w, Start: d.start(w), Count: d.int64()}
	if !d.done() || !s.valid() {
		return FixedState{}, ErrCorrupt
	}
	return s, nil
}

// windowsIn is start as a count of windows (0 for a window that is not
// positive: such a state is invalid and never stored).
func windowsIn(start, window int64) int64 {
	if window <= 0 {
		return 0
	}
	return start / window
}

// start reads a count of windows of length w and returns the instant it
// stands for, failing the decoder past MaxTime.
func (d *decoder) start(w int64) int64 {
	n := d.int64()
	// A product, not MaxTime/w: a division costs more than the rest of
	// the decoding.
	hi, lo := bits.Mul64(uint64(n), uint64(w))
	if d.bad || w <= 0 || hi != 0 || lo > uint64(MaxTime) {
		d.bad = true
		return 0
	}
	return int64(lo)
}
