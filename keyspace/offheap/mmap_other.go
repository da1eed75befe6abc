//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package offheap

// mapper falls back to Go memory where there is no mmap: correct, but the
// garbage collector counts it.
type mapper struct{ offHeap bool }

func systemMapper() mapper { return mapper{} }

func pageSize() int { return 4096 }

// OffHeap reports whether blocks really live outside the Go heap.
func (h *Heap) OffHeap() bool { return h.sys.offHeap }

func (mapper) mmap(n int) ([]byte, error) { return make([]byte, n), nil }

func (mapper) munmap([]byte) error { return nil }

func (mapper) release(b []byte) error {
	clear(b)
	return nil
}
