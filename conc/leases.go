package conc

import (
	"math"
	"slices"
	"strings"
	"unsafe"
)

// lease is one held slot: the request id and the instant it ends.
type lease struct {
	expiry int64
	fp     uint64 // fingerprint(id)
	id     string
}

// compareLease orders leases by expiry, then id, so the stored order (and so
// every result and the encoding) depends only on the leases themselves.
func compareLease(a, b lease) int {
	if c := compareInt(a.expiry, b.expiry); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

const (
	// indexOn is the lease count at which lookups by id switch from a scan
	// of fingerprints to a map. Below it the scan is a few dozen word
	// compares and costs no memory; above it the scan grows with the limit.
	indexOn = 64
	// indexOff is the count at which the map is dropped again; the gap to
	// indexOn keeps a key hovering around one threshold from rebuilding it
	// on every call.
	indexOff = 16
	// minShrinkCap is the buffer capacity below which a buffer is never
	// reallocated smaller: small keys keep their storage.
	minShrinkCap = 32
)

// Leases is the state of one CONC key: the leases it holds, in ascending
// (expiry, id) order, so expired leases are always a prefix and the earliest
// and latest expiry are at the ends. The zero value holds no lease.
//
// The leases are buf[head:]. Leases mostly end in the order they began (by
// expiry, or released by requests of similar length), so the front of the
// slice is where removals happen; keeping a movable head makes those O(1)
// instead of shifting the whole slice, which at MaxLimit is 320 KB a call.
// A removal elsewhere shifts whichever side is shorter.
//
// Memory is proportional to the leases held: the buffer is reallocated when
// under a quarter used (dead head slots count as unused), and the id index
// exists only while there are many leases. The index is only looked up,
// never iterated, so map order cannot leak.
//
// Methods mutate in place and a copy shares storage with the original, so
// keep one Leases per key and pass it by pointer.
type Leases struct {
	buf  []lease
	head int // buf[:head] are zeroed slots, free for reuse
	// index maps id → expiry while there are many leases, so a lease is
	// found by binary search on expiry instead of a scan. Nil otherwise.
	index map[string]int64
}

// all is the stored leases, live or not yet pruned, in order.
func (l *Leases) all() []lease {
	return l.buf[l.head:]
}

// find returns the position in all() of the stored lease with this id,
// whose fingerprint is fp, or -1.
func (l *Leases) find(id []byte, fp uint64) int {
	leases := l.all()
	if l.index != nil {
		expiry, ok := l.index[string(id)]
		if !ok {
			return -1
		}
		// Leases sharing an instant are few: search by expiry, then scan.
		i, _ := slices.BinarySearchFunc(leases, expiry, func(x lease, e int64) int {
			return compareInt(x.expiry, e)
		})
		for ; i < len(leases) && leases[i].expiry == expiry; i++ {
			if leases[i].fp == fp && leases[i].id == string(id) {
				return i
			}
		}
		panic("conc: lease index out of sync")
	}
	for i := range leases {
		if leases[i].fp == fp && leases[i].id == string(id) {
			return i
		}
	}
	return -1
}

// insert stores a new lease; the id, whose fingerprint is fp, must not be
// held. The id is copied, so the caller's buffer is not retained.
func (l *Leases) insert(id []byte, fp uint64, expiry int64) {
	x := lease{expiry: expiry, fp: fp, id: string(id)}
	leases := l.all()
	// Leases of one key usually share a duration, so a new one is usually
	// the latest: check the end before searching.
	i := len(leases)
	if i > 0 && compareLease(leases[i-1], x) > 0 {
		i, _ = slices.BinarySearchFunc(leases, x, compareLease)
	}
	switch {
	case i == 0 && l.head > 0:
		l.head--
		l.buf[l.head] = x
	default:
		if len(l.buf) == cap(l.buf) {
			l.makeRoom()
		}
		l.buf = slices.Insert(l.buf, l.head+i, x)
	}
	if l.index != nil {
		l.index[x.id] = expiry
	} else if len(l.buf)-l.head >= indexOn {
		l.buildIndex()
	}
}

// makeRoom frees space at the end of a full buffer: by sliding the leases
// down over the dead head slots when those are at least a third of it (so
// the slide is paid for by as many removals), else by moving to a buffer
// twice the size of the live leases.
func (l *Leases) makeRoom() {
	n := len(l.buf) - l.head
	if l.head > 0 && l.head >= n/2 {
		copy(l.buf, l.buf[l.head:])
		clear(l.buf[n:])
		l.buf = l.buf[:n]
	} else {
		l.buf = append(make([]lease, 0, max(2*n, 4)), l.buf[l.head:]...)
	}
	l.head = 0
}

func (l *Leases) buildIndex() {
	leases := l.all()
	l.index = make(map[string]int64, len(leases))
	for _, x := range leases {
		l.index[x.id] = x.expiry
	}
}

// move gives the lease at position i of all() a new expiry, shifting the
// leases in between by one place to keep the order.
func (l *Leases) move(i int, expiry int64) {
	leases := l.all()
	x := leases[i]
	x.expiry = expiry
	j, _ := slices.BinarySearchFunc(leases, x, compareLease)
	// j is where x would go with the old entry still in place; the old
	// entry sits before it when moving later.
	if j > i {
		j--
		copy(leases[i:j], leases[i+1:j+1])
	} else {
		copy(leases[j+1:i+1], leases[j:i])
	}
	leases[j] = x
	if l.index != nil {
		l.index[x.id] = expiry
	}
}

// remove drops the leases at positions [i, j) of all().
func (l *Leases) remove(i, j int) {
	if i == j {
		return
	}
	leases := l.all()
	if l.index != nil {
		for _, x := range leases[i:j] {
			delete(l.index, x.id)
		}
	}
	if i < len(leases)-j {
		// Fewer before than after: shift the front part up.
		copy(leases[j-i:j], leases[:i])
		clear(leases[:j-i])
		l.head += j - i
	} else {
		l.buf = slices.Delete(l.buf, l.head+i, l.head+j)
	}
	n := len(l.buf) - l.head
	if l.index != nil && n <= indexOff {
		l.index = nil
	}
	switch c := cap(l.buf); {
	case n == 0:
		l.buf, l.head = nil, 0
	case c > minShrinkCap && n < c/4:
		l.buf, l.head = append(make([]lease, 0, 2*n), l.buf[l.head:]...), 0
	}
}

// firstLive is the position in all() of the first lease with expiry after
// now: the count of leases that are gone at now.
func (l *Leases) firstLive(now int64) int {
	leases := l.all()
	// Expired leases are few between calls, so walk from the front rather
	// than search the whole slice.
	i := 0
	for i < len(leases) && leases[i].expiry <= now {
		i++
	}
	return i
}

// prune drops every lease that is gone at now.
func (l *Leases) prune(now int64) {
	l.remove(0, l.firstLive(now))
}

// ExpireAt is the instant from which the key holds no live lease: the
// latest expiry, or math.MinInt64 when it holds none. Empty(now) is exactly
// now >= ExpireAt(), so the keyspace may use it as the key's deadline.
func (l *Leases) ExpireAt() int64 {
	if len(l.buf) == l.head {
		return math.MinInt64
	}
	return l.buf[len(l.buf)-1].expiry
}

// Empty reports whether the key holds no live lease at now, so it can be
// deleted.
func (l *Leases) Empty(now int64) bool {
	return now >= l.ExpireAt()
}

// Bytes is the memory the leases hold: the struct, the lease array and
// the ids, and the id index when there is one (its entries counted at
// about twice their size, for the map's own overhead).
func (l *Leases) Bytes() int {
	n := int(unsafe.Sizeof(*l)) + cap(l.buf)*int(unsafe.Sizeof(lease{}))
	for _, x := range l.buf {
		n += len(x.id)
	}
	for id := range l.index {
		n += 2 * (len(id) + int(unsafe.Sizeof("")) + 8)
	}
	return n
}
