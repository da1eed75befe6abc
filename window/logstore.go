package window

import (
	"math"
	"unsafe"
)

// LogState is the sliding window log of one key: every admitted unit with
// the instant it was admitted, run-length encoded so that units admitted at
// the same nanosecond (one request's cost, or a pipeline read at one clock
// tick) share an entry.
//
// Layout: the newest entry is held in tail/tailUnits; older entries live in
// times[head:] with cum, the running total of units from times[0]. Entries
// before head have left the window and wait for the next compaction. Two
// slices per key, never one heap object per entry: 12 bytes per distinct
// timestamp. The running totals make "units after t" and "when will n units
// have left" binary searches, so no check scans the log.
//
// Check never writes into memory the old state can see (it appends past
// its length, or allocates), so an old value stays valid to read or encode.
// Like append, though, two successors derived from the same state may share
// memory: store at most one, or Clone first.
type LogState struct {
	times     []int64  // ascending, all before tail
	cum       []uint32 // cum[j] = units in times[0..j]; same length and capacity as times
	head      int      // times[head:] may still be in the window
	tail      int64    // newest admission instant, when tailUnits > 0
	tailUnits int64    // units admitted at tail; 0 means the log is empty
}

// minLogCap is the smallest array a log allocates, so small logs do not
// reallocate on every second request.
const minLogCap = 4

// Clone returns a copy that shares no memory with s.
func (s LogState) Clone() LogState {
	c := s.compacted(0)
	if len(c.times) == 0 {
		c.times, c.cum = nil, nil
	}
	return c
}

// Tail is the instant of the newest admission (0 when the log is empty):
// where a charge just admitted went.
func (s LogState) Tail() int64 { return s.tail }

// Entries is the number of distinct timestamps the log holds.
func (s LogState) Entries() int {
	if s.tailUnits == 0 {
		return 0
	}
	return len(s.times) - s.head + 1
}

// Units is the number of units the log holds (all of them, whatever the
// window: entries leave only when a later admission prunes them).
func (s LogState) Units() int64 {
	return s.unitsFrom(s.head) + s.tailUnits
}

// MemoryBytes estimates the memory the key's value holds: the struct and
// both arrays' full capacity, including entries not yet compacted away.
func (s LogState) MemoryBytes() int64 {
	return int64(unsafe.Sizeof(s)) + int64(cap(s.times))*8 + int64(cap(s.cum))*4
}

// cumBefore is the running total before times[i].
func (s LogState) cumBefore(i int) int64 {
	if i == 0 {
		return 0
	}
	return int64(s.cum[i-1])
}

// unitsFrom is the units in times[i:], not counting the tail.
func (s LogState) unitsFrom(i int) int64 {
	return s.cumBefore(len(s.times)) - s.cumBefore(i)
}

// firstAfter is the index of the first entry in times[head:] later than t
// (len(times) if none).
func (s LogState) firstAfter(t int64) int {
	lo, hi := s.head, len(s.times)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s.times[mid] > t {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// inWindow is the units admitted after horizon, with i = firstAfter(horizon).
func (s LogState) inWindow(i int, horizon int64) int64 {
	if s.tailUnits == 0 || s.tail <= horizon {
		return 0
	}
	return s.unitsFrom(i) + s.tailUnits
}

// leaveAt is the instant at which, counting from entry i, at least n units
// (0 < n ≤ the units from i on, tail included) will have left a window of w.
func (s LogState) leaveAt(i int, n, w int64) int64 {
	target := s.cumBefore(i) + n
	lo, hi := i, len(s.times)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if int64(s.cum[mid]) >= target {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo < len(s.times) {
		return s.times[lo] + w
	}
	return s.tail + w
}

// admit returns s with everything at or before horizon dropped (i =
// firstAfter(horizon)) and units more admitted at now, which is not before
// the tail.
func (s LogState) admit(i int, horizon, now, units int64) LogState {
	if s.tailUnits == 0 || s.tail <= horizon {
		return LogState{tail: now, tailUnits: units}
	}
	s.head = i
	if s.tail == now {
		s.tailUnits += units
		return s
	}
	total := s.cumBefore(len(s.times)) + s.tailUnits
	if len(s.times) == cap(s.times) || total > math.MaxUint32 {
		s = s.compacted(1)
		total = s.cumBefore(len(s.times)) + s.tailUnits
	}
	s.times = append(s.times, s.tail)
	s.cum = append(s.cum, uint32(total))
	s.tail, s.tailUnits = now, units
	return s
}

// compacted copies the live entries to fresh arrays with room for at least
// extra more, restarting the running totals at zero.
func (s LogState) compacted(extra int) LogState {
	live := len(s.times) - s.head
	capacity := 0
	if live+extra > 0 {
		capacity = max(minLogCap, 2*(live+extra))
	}
	base := s.cumBefore(s.head)
	c := LogState{
		times:     make([]int64, live, capacity),
		cum:       make([]uint32, live, capacity),
		tail:      s.tail,
		tailUnits: s.tailUnits,
	}
	copy(c.times, s.times[s.head:])
	for j, v := range s.cum[s.head:] {
		c.cum[j] = uint32(int64(v) - base)
	}
	return c
}

// Bytes is the memory the state holds: the struct and its arrays.
func (s *LogState) Bytes() int {
	return int(unsafe.Sizeof(*s)) + cap(s.times)*8 + cap(s.cum)*4
}
