package server

import (
	"math"
	"runtime/debug"
)

// MemoryLimitFactor is how far past maxmemory the process's resident
// memory may go at steady state: the Go heap gets what the keyspace's
// off-heap blocks leave of maxmemory × this, so the collector runs harder
// as state approaches maxmemory and returns freed pages to the system,
// instead of letting the heap grow to GOGC's target (400%: five times
// what is live) and keep it.
const MemoryLimitFactor = 1.5

// minGoMemoryLimit is the least the Go heap is limited to: below it the
// collector would run without end for what a server needs anyway.
const minGoMemoryLimit = 48 << 20

// fitGoMemoryLimit sets the Go runtime's memory limit from maxmemory, as
// it is now (CONFIG SET changes it) and what the keyspace holds off the
// heap; no limit without maxmemory. A no-op unless Config.GoMemoryLimit.
func (s *Server) fitGoMemoryLimit() {
	if !s.cfg.GoMemoryLimit {
		return
	}
	limit := int64(math.MaxInt64)
	if maxmem := s.env.Tunables.MaxMemory.Load(); maxmem > 0 {
		held := s.env.Machine.Keys().OffHeap().Held
		limit = max(int64(float64(maxmem)*MemoryLimitFactor)-held, minGoMemoryLimit)
	}
	// Changed by a MiB or more (the off-heap blocks move a little all the
	// time): set it.
	if d := limit - s.goMemoryLimit; d > 1<<20 || d < -(1<<20) {
		debug.SetMemoryLimit(limit)
		s.goMemoryLimit = limit
	}
}
