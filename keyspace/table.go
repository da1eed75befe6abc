package keyspace

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"unsafe"

	"github.com/sluice-rl/sluice/keyspace/offheap"
)

// A table holds one slot's keys.
//
// Records live back to back in arena:
//
//	kind (1 byte, high bit set once deleted) | key length (uvarint) | key | word (8 bytes LE) | tail
//
// and the tail is, for a GCRA key, nothing; for a key whose state is kept
// inline (inlineBit set in the kind byte), the room for it (1 byte), its
// length (1 byte) and the state (room bytes); for any other, the index of
// its object in objs (4 bytes LE).
//
// index is an open-addressing (linear probing) array of record offsets + 1;
// 0 marks an empty position and tombstone a deleted one. A key's probe
// starts at its hash scaled to the index's length (any length, so the
// index is sized to its allocator's class, not to a power of two). While
// the arena is under tagLimit bytes, an entry's top 8 bits hold a tag
// from the key's hash, so a probe passes other keys' entries without
// reading their records: a record read is a cache miss, a tag is not.
// Deleted records stay in the arena until more than half of it is
// garbage, then the table is rebuilt in record order.
//
// index and arena are blocks of the keyspace's off-heap memory (package
// offheap): the garbage collector neither scans them nor lets them double
// the heap. The table frees a block as soon as it replaces it, so a key
// slice read from the arena is valid only until the table next changes
// (and only under the slot's lock); callers that keep a key copy it.
// objs holds Go values and stays on the Go heap.
type table struct {
	index []uint32
	arena []byte
	// objs holds the state of kinds with more than one word; a record refers
	// to its object by position. free lists positions to reuse.
	objs []any
	free []uint32
	// live counts records, used counts index positions that are not empty
	// (records and tombstones), dead counts garbage bytes in arena.
	live, used, dead int
	// byKind counts the records of each kind (expired ones not yet swept
	// included), so INFO reports the reservations held, and the keys that
	// are users' keys, without a walk.
	byKind [MaxKinds]int
	// gen changes whenever records move (a rebuild or an emptying), so an
	// arena offset kept from before (a sweep cursor) is known to be stale.
	gen uint32
	// wide: the arena outgrew tagLimit, so entries are offsets + 1 alone.
	wide bool
	heap *offheap.Heap
}

const (
	tombstone = ^uint32(0)
	minIndex  = 8
	// maxArena keeps offsets + 1 below the tombstone value.
	maxArena = 1<<32 - 2
	// tagShift is where a tagged entry's tag starts; tagLimit is the most
	// arena bytes a table keeps tagged entries for (offsets + 1 then fit
	// below the tag and never equal the tombstone).
	tagShift = 24
	tagBits  = uint32(0xff) << tagShift
	tagLimit = 1<<tagShift - 2
	wordSize = 8
	objSize  = 4
	// The index grows when more than loadNum/loadDen of it is in use, to
	// a length that puts its load at growNum/growDen.
	loadNum, loadDen = 13, 16
	growNum, growDen = 3, 5
)

// ref locates a live record: its index position, its offset, and the
// offset of its word. It is valid until the table is next changed by an
// insert or delete.
type ref struct {
	pos  int
	off  int
	word int
	kind Kind
	// inline: the record holds its state (see table).
	inline bool
}

// deletedBit marks a deleted record's kind byte; the kind stays readable so
// the record's length can still be worked out when walking the arena.
// inlineBit marks a record whose state is inline.
const (
	deletedBit = 0x80
	inlineBit  = 0x40
	// inlineSlack is the room an inline state gets beyond its length, so a
	// state that grows by a byte or two (a count passing 127) stays put.
	inlineSlack = 2
	// MaxInlineState is the longest state a record can hold inline.
	MaxInlineState = 255 - inlineSlack
)

// recordAt reads the record at off: its kind (KindNone once deleted), key,
// the offset of its word, and the offset of the next record.
func (t *table) recordAt(off int) (kind Kind, key []byte, word, next int) {
	return recordIn(t.arena, off)
}

func recordIn(arena []byte, off int) (kind Kind, key []byte, word, next int) {
	b := arena[off]
	klen, n := binary.Uvarint(arena[off+1:])
	start := off + 1 + n
	key = arena[start : start+int(klen)]
	word = start + int(klen)
	next = word + wordSize
	switch {
	case b&inlineBit != 0:
		next += 2 + int(arena[next])
	case Kind(b&^deletedBit) != KindGCRA:
		next += objSize
	}
	if b&deletedBit != 0 {
		return KindNone, key, word, next
	}
	return Kind(b &^ inlineBit), key, word, next
}

// hasObject reports whether the record at off refers to an object.
func (t *table) hasObject(off int) bool {
	b := t.arena[off]
	return b&inlineBit == 0 && Kind(b&^deletedBit) != KindGCRA
}

// recordLen is the length of a record: of one with an object, or, when
// inline is set, with room for a state of stateLen bytes.
func recordLen(kind Kind, keyLen int, inline bool, stateLen int) int {
	n := 1 + uvarintLen(uint64(keyLen)) + keyLen + wordSize
	switch {
	case inline:
		n += 2 + stateLen + inlineSlack
	case kind != KindGCRA:
		n += objSize
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func (t *table) wordAt(word int) int64 {
	return int64(binary.LittleEndian.Uint64(t.arena[word:]))
}

func (t *table) setWordAt(word int, v int64) {
	binary.LittleEndian.PutUint64(t.arena[word:], uint64(v))
}

func (t *table) objAt(word int) uint32 {
	return binary.LittleEndian.Uint32(t.arena[word+wordSize:])
}

// tagMask is the part of an index entry that holds a tag: none once the
// table is wide.
func (t *table) tagMask() uint32 {
	if t.wide {
		return 0
	}
	return tagBits
}

// tagOf is the tag of hash h, before masking (the hash's top bits; its
// low 32 bits choose the position).
func tagOf(h uint64) uint32 { return uint32(h >> 32) }

// home is the first position of hash h's probe sequence in an index of n
// positions.
func home(h uint64, n int) int { return int(uint64(uint32(h)) * uint64(n) >> 32) }

// find returns the record holding key.
func (t *table) find(h uint64, key []byte) (ref, bool) {
	n := len(t.index)
	if n == 0 {
		return ref{}, false
	}
	mask := t.tagMask()
	want := tagOf(h) & mask
	for pos := home(h, n); ; {
		e := t.index[pos]
		if e == 0 {
			return ref{}, false
		}
		if e != tombstone && e&mask == want {
			off := int(e&^mask - 1)
			kind, k, word, _ := t.recordAt(off)
			if bytes.Equal(k, key) {
				return ref{pos: pos, off: off, word: word, kind: kind, inline: t.arena[off]&inlineBit != 0}, true
			}
		}
		if pos++; pos == n {
			pos = 0
		}
	}
}

// insert adds a record for a key that find reported absent: with obj, or
// when inline is set with state in the record. It fails when the slot's
// arena cannot grow further or memory is refused.
func (t *table) insert(seed maphash.Seed, key []byte, kind Kind, word int64, obj any, inline bool, state []byte) (ref, error) {
	if inline && len(state) > MaxInlineState {
		return ref{}, ErrStateSize
	}
	n := recordLen(kind, len(key), inline, len(state))
	if len(t.arena)-t.dead+n > maxArena {
		return ref{}, ErrSlotFull
	}
	if len(t.arena)+n > maxArena {
		if err := t.rebuild(seed, len(t.index), n); err != nil {
			return ref{}, err
		}
	}
	if (t.used+1)*loadDen > len(t.index)*loadNum {
		if err := t.rebuild(seed, indexSizeFor(t.live+1), n); err != nil {
			return ref{}, err
		}
	}
	if err := t.reserve(n); err != nil {
		return ref{}, err
	}
	base := unsafe.SliceData(t.arena)
	off := len(t.arena)
	wordOff := t.appendHead(kind, inline, key, word)
	switch {
	case inline:
		t.appendState(state)
	case kind != KindGCRA:
		t.arena = binary.LittleEndian.AppendUint32(t.arena, t.putObj(obj))
	}
	if unsafe.SliceData(t.arena) != base {
		panic("keyspace: arena append moved off its block")
	}
	pos := t.place(maphash.Bytes(seed, key), off)
	t.live++
	t.byKind[kind]++
	return ref{pos: pos, off: off, word: wordOff, kind: kind, inline: inline}, nil
}

// reuse overwrites r's record with a new value of the same shape (kind,
// inline or not, an inline state that fits its room) and reports whether
// it could.
func (t *table) reuse(r ref, kind Kind, word int64, obj any, inline bool, state []byte) (ref, bool) {
	if r.kind != kind || r.inline != inline {
		return r, false
	}
	switch {
	case inline:
		if !t.fitState(r.word, state) {
			return r, false
		}
	case kind != KindGCRA:
		t.objs[t.objAt(r.word)] = obj
	}
	t.setWordAt(r.word, word)
	return r, true
}

// appendHead appends a record's kind byte, key and word (the caller has
// reserved room) and returns the word's offset. key may lie in the arena
// itself, before its end.
func (t *table) appendHead(kind Kind, inline bool, key []byte, word int64) int {
	b := byte(kind)
	if inline {
		b |= inlineBit
	}
	t.arena = append(t.arena, b)
	t.arena = binary.AppendUvarint(t.arena, uint64(len(key)))
	t.arena = append(t.arena, key...)
	wordOff := len(t.arena)
	t.arena = binary.LittleEndian.AppendUint64(t.arena, uint64(word))
	return wordOff
}

// appendState appends an inline state with its room and length.
func (t *table) appendState(state []byte) {
	t.arena = append(t.arena, byte(len(state)+inlineSlack), byte(len(state)))
	t.arena = append(t.arena, state...)
	t.arena = append(t.arena, make([]byte, inlineSlack)...)
}

// fitState writes state into the room of the inline record whose word is
// at word, if it fits, and reports whether it did.
func (t *table) fitState(word int, state []byte) bool {
	at := word + wordSize
	if len(state) > int(t.arena[at]) {
		return false
	}
	t.arena[at+1] = byte(len(state))
	copy(t.arena[at+2:], state)
	return true
}

// stateAt is the inline state of the record whose word is at word.
func (t *table) stateAt(word int) []byte {
	at := word + wordSize
	return t.arena[at+2 : at+2+int(t.arena[at+1])]
}

// setState replaces r's inline state. A state that fits the record's room
// is written in place; a longer one moves the record to the arena's end,
// keeping its index position, so every other ref stays valid (records do
// not move; the old copy becomes garbage for the next compaction).
func (t *table) setState(r ref, state []byte) (ref, error) {
	if t.fitState(r.word, state) {
		return r, nil
	}
	if len(state) > MaxInlineState {
		return r, ErrStateSize
	}
	if r.pos < 0 {
		panic("keyspace: setState on an entry from a walk")
	}
	_, key, _, _ := t.recordAt(r.off)
	n := recordLen(r.kind, len(key), true, len(state))
	if len(t.arena)+n > maxArena {
		return r, ErrSlotFull
	}
	if err := t.reserve(n); err != nil {
		return r, err
	}
	// reserve may have moved the arena to another block (at the same
	// offsets): read the record again.
	_, key, word, next := t.recordAt(r.off)
	base := unsafe.SliceData(t.arena)
	off := len(t.arena)
	wordOff := t.appendHead(r.kind, true, key, t.wordAt(word))
	t.appendState(state)
	if unsafe.SliceData(t.arena) != base {
		panic("keyspace: arena append moved off its block")
	}
	t.arena[r.off] |= deletedBit
	t.dead += next - r.off
	mask := t.tagMask() // after reserve, which may have widened the table
	t.index[r.pos] = uint32(off+1) | t.index[r.pos]&mask
	return ref{pos: r.pos, off: off, word: wordOff, kind: r.kind, inline: true}, nil
}

// reserve makes room for n more arena bytes, moving the arena to a bigger
// block when it must. Growth is by size class or an eighth, not doubling,
// so an arena's slack stays bounded.
func (t *table) reserve(n int) error {
	need := len(t.arena) + n
	if !t.wide && need > tagLimit {
		t.widen()
	}
	if need <= cap(t.arena) {
		return nil
	}
	// Size classes (at most 12.5% apart) are the growth steps of a small
	// arena; a large one, rounded to the page only, grows by an eighth.
	want := need
	if need > offheap.MaxSmall {
		want += need / 8
	}
	b, err := t.heap.Alloc(min(want, maxArena))
	if err != nil {
		return errNoMemory(err)
	}
	b = b[:len(t.arena)]
	copy(b, t.arena)
	t.heap.Free(t.arena)
	t.arena = b
	return nil
}

// widen drops the tags from the index's entries, in place (a position
// depends on the hash's low bits only), before the arena passes tagLimit.
func (t *table) widen() {
	mask := t.tagMask()
	for i, e := range t.index {
		if e != 0 && e != tombstone {
			t.index[i] = e &^ mask
		}
	}
	t.wide = true
}

// allocIndex returns a zeroed index of at least size positions: as many
// as its block holds.
func (t *table) allocIndex(size int) ([]uint32, error) {
	size = t.heap.ClassSize(size*4) / 4
	b, err := t.heap.Alloc(size * 4)
	if err != nil {
		return nil, errNoMemory(err)
	}
	clear(b)
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), size), nil
}

func (t *table) freeIndex(index []uint32) {
	if len(index) > 0 {
		t.heap.Free(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(index))), len(index)*4))
	}
}

// release frees the table's blocks and empties it.
func (t *table) release() {
	t.heap.Free(t.arena)
	t.freeIndex(t.index)
	*t = table{heap: t.heap, gen: t.gen + 1}
}

// place puts offset off at the first free position of h's probe sequence.
func (t *table) place(h uint64, off int) int {
	e := uint32(off+1) | tagOf(h)&t.tagMask()
	n := len(t.index)
	for pos := home(h, n); ; {
		switch t.index[pos] {
		case 0:
			t.used++
			fallthrough
		case tombstone:
			t.index[pos] = e
			return pos
		}
		if pos++; pos == n {
			pos = 0
		}
	}
}

func (t *table) putObj(obj any) uint32 {
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		t.objs[i] = obj
		return i
	}
	t.objs = append(t.objs, obj)
	return uint32(len(t.objs) - 1)
}

// remove deletes the record r refers to. When compact is set and most of
// the arena is garbage, the table is rebuilt, which moves records.
func (t *table) remove(seed maphash.Seed, r ref, compact bool) {
	_, _, _, next := t.recordAt(r.off)
	if t.hasObject(r.off) {
		i := t.objAt(r.word)
		t.objs[i] = nil
		t.free = append(t.free, i)
	}
	t.arena[r.off] |= deletedBit
	t.index[r.pos] = tombstone
	t.dead += next - r.off
	t.live--
	t.byKind[r.kind]--
	if compact {
		t.maybeCompact(seed)
	}
}

// maybeCompact rebuilds the table when more than half of the arena is
// garbage, and frees everything when the table is empty.
func (t *table) maybeCompact(seed maphash.Seed) bool {
	if t.live == 0 {
		t.release()
		return true
	}
	if t.dead > 256 && t.dead*2 > len(t.arena) {
		// Without memory for the copy the garbage stays until a later try.
		return t.rebuild(seed, indexSizeFor(t.live), 0) == nil
	}
	return false
}

// indexSizeFor is the index length for n keys: their load at
// growNum/growDen, so the index grows again after about a third more.
func indexSizeFor(n int) int {
	return max(minIndex, (n*growDen+growNum-1)/growNum)
}

// rebuild copies the live records, in order, into a fresh arena (with
// room for extra more bytes) and index of the given size, dropping
// tombstones and garbage, and frees the old blocks. On failure the table
// is unchanged.
func (t *table) rebuild(seed maphash.Seed, size, extra int) error {
	old, oldIndex := t.arena, t.index
	live := len(old) - t.dead
	arena, err := t.heap.Alloc(min(max(live+extra+live/8, 1), maxArena))
	if err != nil {
		return errNoMemory(err)
	}
	index, err := t.allocIndex(size)
	if err != nil {
		t.heap.Free(arena)
		return err
	}
	arena = arena[:0]
	// A table of GCRA keys alone has no objects: keep objs nil for it.
	var objs []any
	if n := len(t.objs) - len(t.free); n > 0 {
		objs = make([]any, 0, n)
	}
	t.index, t.used, t.free = index, 0, nil
	t.wide = live > tagLimit
	for off := 0; off < len(old); {
		kind, key, word, next := recordIn(old, off)
		if kind != KindNone {
			newOff := len(arena)
			arena = append(arena, old[off:next]...)
			if old[off]&inlineBit == 0 && kind != KindGCRA {
				i := binary.LittleEndian.Uint32(old[word+wordSize:])
				binary.LittleEndian.PutUint32(arena[len(arena)-objSize:], uint32(len(objs)))
				objs = append(objs, t.objs[i])
			}
			t.place(maphash.Bytes(seed, key), newOff)
		}
		off = next
	}
	t.arena, t.objs, t.dead = arena, objs, 0
	t.gen++
	t.heap.Free(old)
	t.freeIndex(oldIndex)
	return nil
}

// each calls fn for every record from arena offset start on, in record
// order, until fn returns false; it returns the offset to resume from, or
// -1 at the end. fn must not change the table.
func (t *table) each(start int, fn func(r ref, key []byte) bool) int {
	for off := start; off < len(t.arena); {
		kind, key, word, next := t.recordAt(off)
		if kind != KindNone && !fn(ref{pos: -1, off: off, word: word, kind: kind, inline: t.arena[off]&inlineBit != 0}, key) {
			return next
		}
		off = next
	}
	return -1
}

// Sizer is a state that can say how much memory it holds.
type Sizer interface{ Bytes() int }

// bytes is the memory the table holds, for INFO and benchmarks: its index,
// arena and object slots, and what the objects themselves hold.
func (t *table) bytes() int {
	n := cap(t.index)*4 + cap(t.arena) + cap(t.objs)*16 + cap(t.free)*4
	for _, o := range t.objs {
		if s, ok := o.(Sizer); ok {
			n += s.Bytes()
		}
	}
	return n
}
