package offheap

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"unsafe"
)

// ErrMap is returned (wrapped) when the operating system refuses memory.
var ErrMap = errors.New("offheap: cannot map memory")

const (
	// MaxSmall is the largest block served from a size class; larger ones
	// are mapped on their own.
	MaxSmall = 128 << 10
	// spanSize is the unit a size class takes memory in.
	spanSize = 1 << 20
	// regionSpans spans are mapped at once (64 MiB of address space; pages
	// become resident only when written). Few, large mappings: a process
	// may hold only vm.max_map_count (often 65530) of them, and each block
	// over MaxSmall is one.
	regionSpans = 64
	regionSize  = regionSpans * spanSize
	// MinGiveBack: free pages are kept (resident, reused first) until they
	// pass this or a sixteenth of the allocated memory, then given back all
	// at once: a table that grows frees its old block and takes a bigger one
	// at once, and releasing and faulting pages on every such step costs
	// more than the step.
	MinGiveBack = 256 << 10
	// maxUnits bounds the pages of a span tracked one by one.
	maxUnits = 256
)

// classes are the block sizes up to MaxSmall: multiples of 16 up to 128,
// then eight steps per doubling. Every size is a multiple of 16, so blocks
// are aligned for any word type.
var classes = func() []int {
	var c []int
	for s := 16; s <= 128; s += 16 {
		c = append(c, s)
	}
	for base := 128; base < MaxSmall; base *= 2 {
		for step := 1; step <= 8; step++ {
			c = append(c, base+step*base/8)
		}
	}
	return c
}()

// ClassSize is the capacity of a block asked for with n bytes: what Alloc
// returns as cap. Callers that grow a buffer ask for the size they need
// and use the whole capacity.
func (h *Heap) ClassSize(n int) int {
	if n <= MaxSmall {
		return classes[classOf(n)]
	}
	return (n + h.pageSize - 1) / h.pageSize * h.pageSize
}

func classOf(n int) int {
	i, _ := slices.BinarySearch(classes, n)
	return i
}

// Stats describe a heap's memory.
type Stats struct {
	// Allocated is the capacity of the blocks handed out and not freed.
	Allocated int64
	// Held is the memory that may be resident: large blocks, and the pages
	// of spans that were written and not given back since. Pages whose
	// blocks are all free are given back in batches, so Held exceeds what
	// the blocks in use touch by at most max(MinGiveBack, Allocated/16).
	Held int64
	// Mapped is the address space taken, resident or not.
	Mapped int64
}

// Heap is an allocator of off-heap blocks, safe for concurrent use.
type Heap struct {
	mu       sync.Mutex
	sys      mapper
	pageSize int
	// unit is the granularity pages are given back in: the page, or the
	// whole span where a span is not maxUnits pages or fewer.
	unit    int
	regions []*region // sorted by base
	partial [96]spanList
	empty   []*span // spans of no class
	// dirty lists the spans that may hold idle pages: a give-back visits
	// them, not the whole heap.
	dirty []*span
	large map[uintptr][]byte
	stats Stats
	// idle counts bytes of pages held with no block in use: what the next
	// give-back returns.
	idle   int64
	closed bool
}

type region struct {
	mem   []byte
	base  uintptr
	spans [regionSpans]span
}

type span struct {
	mem        []byte
	class      int // -1: none
	size, n    int
	used       int
	bitmap     []uint64              // blocks in use
	resident   [maxUnits / 64]uint64 // units (pages) that may be resident
	inUnit     [maxUnits]uint32      // blocks in use overlapping each unit
	prev, next *span
	dirty      bool // in Heap.dirty
}

func (s *span) isResident(u int) bool { return s.resident[u/64]&(1<<(u%64)) != 0 }

func (s *span) setResident(u int, on bool) {
	if on {
		s.resident[u/64] |= 1 << (u % 64)
	} else {
		s.resident[u/64] &^= 1 << (u % 64)
	}
}

type spanList struct{ head *span }

func (l *spanList) push(s *span) {
	s.prev, s.next = nil, l.head
	if l.head != nil {
		l.head.prev = s
	}
	l.head = s
}

func (l *spanList) remove(s *span) {
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		l.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	}
	s.prev, s.next = nil, nil
}

// New returns an empty heap. It maps nothing until the first Alloc.
func New() *Heap {
	if len(classes) > len(Heap{}.partial) {
		panic("offheap: too many size classes")
	}
	h := &Heap{sys: systemMapper(), pageSize: pageSize(), large: map[uintptr][]byte{}}
	h.unit = h.pageSize
	if spanSize%h.unit != 0 || spanSize/h.unit > maxUnits {
		h.unit = spanSize
	}
	return h
}

// PageSize is the page size blocks over MaxSmall are rounded to.
func (h *Heap) PageSize() int { return h.pageSize }

// Alloc returns a block of n bytes (n > 0) whose capacity is
// h.ClassSize(n). Its contents are undefined: a caller that needs zeroes
// clears it. It fails only when the operating system refuses memory.
func (h *Heap) Alloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("%w: heap closed", ErrMap)
	}
	if n > MaxSmall {
		size := h.ClassSize(n)
		mem, err := h.sys.mmap(size)
		if err != nil {
			return nil, fmt.Errorf("%w: %d bytes: %v", ErrMap, size, err)
		}
		h.large[addr(mem)] = mem
		h.stats.Allocated += int64(size)
		h.stats.Held += int64(size)
		h.stats.Mapped += int64(size)
		return mem[:n], nil
	}
	c := classOf(n)
	s := h.partial[c].head
	if s == nil {
		var err error
		if s, err = h.newSpan(c); err != nil {
			return nil, err
		}
		h.partial[c].push(s)
	}
	i := s.take()
	if s.used == s.n {
		h.partial[c].remove(s)
	}
	h.stats.Allocated += int64(s.size)
	for u := i * s.size / h.unit; u <= ((i+1)*s.size-1)/h.unit; u++ {
		switch {
		case !s.isResident(u):
			s.setResident(u, true)
			h.stats.Held += int64(h.unit)
		case s.inUnit[u] == 0:
			h.idle -= int64(h.unit)
		}
		s.inUnit[u]++
	}
	return s.mem[i*s.size : i*s.size+n : (i+1)*s.size], nil
}

// take marks the first free block used and returns its number.
func (s *span) take() int {
	for w, word := range s.bitmap {
		if word != ^uint64(0) {
			bit := bits.TrailingZeros64(^word)
			s.bitmap[w] |= 1 << bit
			s.used++
			return w*64 + bit
		}
	}
	panic("offheap: full span listed as partial")
}

// newSpan gives class c a span: one given back earlier, or one of a new
// region.
func (h *Heap) newSpan(c int) (*span, error) {
	if len(h.empty) == 0 {
		mem, err := h.sys.mmap(regionSize)
		if err != nil {
			return nil, fmt.Errorf("%w: %d bytes: %v", ErrMap, regionSize, err)
		}
		r := &region{mem: mem, base: addr(mem)}
		for i := range r.spans {
			r.spans[i] = span{mem: mem[i*spanSize : (i+1)*spanSize : (i+1)*spanSize], class: -1}
		}
		// Hand spans out from the region's start.
		for i := regionSpans - 1; i >= 0; i-- {
			h.empty = append(h.empty, &r.spans[i])
		}
		at, _ := slices.BinarySearchFunc(h.regions, r.base, byBase)
		h.regions = slices.Insert(h.regions, at, r)
		h.stats.Mapped += regionSize
	}
	s := h.empty[len(h.empty)-1]
	h.empty = h.empty[:len(h.empty)-1]
	s.class, s.size = c, classes[c]
	s.n = spanSize / s.size
	s.used = 0
	words := (s.n + 63) / 64
	if cap(s.bitmap) >= words {
		s.bitmap = s.bitmap[:words]
		clear(s.bitmap)
	} else {
		s.bitmap = make([]uint64, words)
	}
	return s, nil
}

// Free gives back a block Alloc returned (any reslice of it that keeps its
// first byte). A nil or empty-capacity block is ignored. Freeing a block
// twice, or memory Alloc did not return, panics: it is a bug that would
// otherwise corrupt the heap.
func (h *Heap) Free(b []byte) {
	if cap(b) == 0 {
		return
	}
	p := addr(b)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if mem, ok := h.large[p]; ok {
		delete(h.large, p)
		h.stats.Allocated -= int64(len(mem))
		h.stats.Held -= int64(len(mem))
		h.stats.Mapped -= int64(len(mem))
		if err := h.sys.munmap(mem); err != nil {
			panic(fmt.Sprintf("offheap: munmap: %v", err))
		}
		h.maybeGiveBack()
		return
	}
	s := h.spanOf(p)
	if s == nil || s.class < 0 {
		panic("offheap: free of memory this heap did not allocate")
	}
	off := int(p - addr(s.mem))
	i := off / s.size
	if off%s.size != 0 || s.bitmap[i/64]&(1<<(i%64)) == 0 {
		panic("offheap: double free or free of a block's interior")
	}
	s.bitmap[i/64] &^= 1 << (i % 64)
	wasFull := s.used == s.n
	s.used--
	h.stats.Allocated -= int64(s.size)
	c := s.class
	if wasFull {
		h.partial[c].push(s)
	}
	for u := i * s.size / h.unit; u <= ((i+1)*s.size-1)/h.unit; u++ {
		if s.inUnit[u]--; s.inUnit[u] == 0 {
			h.idle += int64(h.unit)
			if !s.dirty {
				s.dirty = true
				h.dirty = append(h.dirty, s)
			}
		}
	}
	// An empty span can serve any class (its pages, resident or not, are
	// reused as they are).
	if s.used == 0 {
		h.partial[c].remove(s)
		s.class = -1
		h.empty = append(h.empty, s)
	}
	h.maybeGiveBack()
}

// maybeGiveBack gives the idle pages back once there are enough of them.
func (h *Heap) maybeGiveBack() {
	if h.idle > max(MinGiveBack, h.stats.Allocated/16) {
		h.giveBack()
	}
}

// GiveBack returns every page no block in use touches to the operating
// system now, rather than when enough have gathered.
func (h *Heap) GiveBack() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.giveBack()
	}
}

// giveBack releases the idle pages of the spans that may have some, in
// runs. Pages rather than whole spans: a class that tables grew through
// keeps a few blocks scattered over many spans, and only the pages under
// those blocks should stay resident.
func (h *Heap) giveBack() {
	units := spanSize / h.unit
	for _, s := range h.dirty {
		s.dirty = false
		for u := 0; u < units; {
			if !s.isResident(u) || s.inUnit[u] != 0 {
				u++
				continue
			}
			end := u + 1
			for end < units && s.isResident(end) && s.inUnit[end] == 0 {
				end++
			}
			// A failed madvise leaves the pages resident and counted.
			if h.sys.release(s.mem[u*h.unit:end*h.unit]) == nil {
				for ; u < end; u++ {
					s.setResident(u, false)
					h.stats.Held -= int64(h.unit)
					h.idle -= int64(h.unit)
				}
			}
			u = end
		}
	}
	clear(h.dirty)
	h.dirty = h.dirty[:0]
}

func (h *Heap) spanOf(p uintptr) *span {
	i, found := slices.BinarySearchFunc(h.regions, p, byBase)
	if !found {
		i--
	}
	if i < 0 {
		return nil
	}
	r := h.regions[i]
	if p < r.base || p >= r.base+regionSize {
		return nil
	}
	return &r.spans[(p-r.base)/spanSize]
}

// Stats reports the heap's memory.
func (h *Heap) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats
}

// Close unmaps every block. Nothing may use the heap's memory afterwards;
// Alloc fails and Free does nothing.
func (h *Heap) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	var errs []error
	for _, mem := range h.large {
		errs = append(errs, h.sys.munmap(mem))
	}
	for _, r := range h.regions {
		errs = append(errs, h.sys.munmap(r.mem))
	}
	h.large, h.regions, h.empty, h.dirty = nil, nil, nil, nil
	h.partial = [len(h.partial)]spanList{}
	h.stats, h.idle = Stats{}, 0
	return errors.Join(errs...)
}

// byBase orders regions by their base address, for binary search.
func byBase(r *region, base uintptr) int { return cmp.Compare(r.base, base) }

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
