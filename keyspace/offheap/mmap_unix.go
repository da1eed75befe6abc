//go:build linux || darwin || freebsd || netbsd || openbsd

package offheap

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapper is where a heap's memory comes from.
type mapper struct{ offHeap bool }

func systemMapper() mapper { return mapper{offHeap: true} }

func pageSize() int { return os.Getpagesize() }

// OffHeap reports whether blocks really live outside the Go heap (false on
// platforms without mmap, where they are ordinary Go memory).
func (h *Heap) OffHeap() bool { return h.sys.offHeap }

func (mapper) mmap(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
}

func (mapper) munmap(b []byte) error { return unix.Munmap(b) }

// release gives the pages back: they read as zeroes when next touched.
func (mapper) release(b []byte) error { return unix.Madvise(b, unix.MADV_DONTNEED) }
