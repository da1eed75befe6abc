package window

import "encoding/binary"

// Encodings (no version byte; the snapshot file carries one):
//
//	CounterState: uvarint Window, uvarint Start, uvarint Prev, uvarint Curr
//	FixedState:   uvarint Window, uvarint Start, uvarint Count
//	LogState:     uvarint entries, then per entry, oldest first:
//	              uvarint (time − previous time, or the time itself first),
//	              uvarint (units − 1)
//
// Every field is non-negative by invariant, so unsigned varints suffice.

// AppendBinary appends the encoding of s to dst.
func (s CounterState) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(s.Window))
	dst = binary.AppendUvarint(dst, uint64(s.Start))
	dst = binary.AppendUvarint(dst, uint64(s.Prev))
	return binary.AppendUvarint(dst, uint64(s.Curr))
}

// DecodeCounter decodes what CounterState.AppendBinary wrote; it returns
// ErrCorrupt for anything else, including a state breaking its invariants.
func DecodeCounter(b []byte) (CounterState, error) {
	d := decoder{b: b}
	s := CounterState{Window: d.int64(), Start: d.int64(), Prev: d.int64(), Curr: d.int64()}
	if !d.done() || !s.valid() {
		return CounterState{}, ErrCorrupt
	}
	return s, nil
}

// AppendBinary appends the encoding of s to dst.
func (s FixedState) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(s.Window))
	dst = binary.AppendUvarint(dst, uint64(s.Start))
	return binary.AppendUvarint(dst, uint64(s.Count))
}

// DecodeFixed decodes what FixedState.AppendBinary wrote; it returns
// ErrCorrupt for anything else, including a state breaking its invariants.
func DecodeFixed(b []byte) (FixedState, error) {
	d := decoder{b: b}
	s := FixedState{Window: d.int64(), Start: d.int64(), Count: d.int64()}
	if !d.done() || !s.valid() {
		return FixedState{}, ErrCorrupt
	}
	return s, nil
}

// AppendBinary appends the encoding of the entries s holds to dst.
func (s LogState) AppendBinary(dst []byte) []byte {
	n := s.Entries()
	dst = binary.AppendUvarint(dst, uint64(n))
	if n == 0 {
		return dst
	}
	prev := int64(0)
	for j := s.head; j < len(s.times); j++ {
		dst = binary.AppendUvarint(dst, uint64(s.times[j]-prev))
		dst = binary.AppendUvarint(dst, uint64(int64(s.cum[j])-s.cumBefore(j)-1))
		prev = s.times[j]
	}
	dst = binary.AppendUvarint(dst, uint64(s.tail-prev))
	return binary.AppendUvarint(dst, uint64(s.tailUnits-1))
}

// DecodeLog decodes what LogState.AppendBinary wrote; it returns ErrCorrupt
// for anything else: times out of order or outside [0, MaxTime], more than
// MaxLogLimit units, trailing bytes.
func DecodeLog(b []byte) (LogState, error) {
	var s LogState
	if err := s.decode(b, false); err != nil {
		return LogState{}, err
	}
	return s, nil
}

// DecodeReusing decodes b into s as DecodeLog does, in s's arrays when
// they are large enough: a caller that keeps one LogState as scratch
// decodes records without allocating. s shares nothing with b.
func (s *LogState) DecodeReusing(b []byte) error {
	if err := s.decode(b, true); err != nil {
		*s = LogState{}
		return err
	}
	return nil
}

func (s *LogState) decode(b []byte, reuse bool) error {
	times, cum := s.times[:0], s.cum[:0]
	*s = LogState{}
	if reuse {
		s.times, s.cum = times, cum
	}
	d := decoder{b: b}
	n := d.int64()
	// Each entry takes at least two bytes, which bounds the allocation
	// whatever the count claims.
	if d.bad || n < 0 || n > MaxLogLimit || n > int64(len(d.b)/2) {
		return ErrCorrupt
	}
	if n == 0 {
		if !d.done() {
			return ErrCorrupt
		}
		return nil
	}
	if n > 1 {
		switch {
		case !reuse:
			times, cum = make([]int64, 0, n-1), make([]uint32, 0, n-1)
		case int64(cap(times)) < n || int64(cap(cum)) < n:
			// Room for the admission a check appends, and then some: a
			// scratch that is decoded into again and again settles.
			times, cum = make([]int64, 0, 2*n), make([]uint32, 0, 2*n)
		}
		s.times, s.cum = times, cum
	}
	t, total := int64(0), int64(0)
	for j := int64(0); j < n; j++ {
		delta, units := d.int64(), d.int64()
		if d.bad || (j > 0 && delta == 0) || delta > MaxTime-t || units >= MaxLogLimit-total {
			return ErrCorrupt
		}
		t += delta
		total += units + 1
		if j < n-1 {
			s.times = append(s.times, t)
			s.cum = append(s.cum, uint32(total))
		} else {
			s.tail, s.tailUnits = t, units+1
		}
	}
	if !d.done() {
		return ErrCorrupt
	}
	return nil
}

// decoder reads unsigned varints that must fit in an int64, remembering the
// first failure so callers check once.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) int64() int64 {
	if d.bad {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > 1<<63-1 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return int64(v)
}

func (d *decoder) done() bool { return !d.bad && len(d.b) == 0 }
