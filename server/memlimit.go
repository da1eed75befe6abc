package server

import (
	"math"
	"runtime/debug"

	"github.com/sluice-rl/sluice/commands"
)

// MemoryLimitFactor is how far past maxmemory the process's resident
// memory may go at steady state: the Go runtime gets what the keyspace's
// off-heap blocks and the file-backed pages (the binary) leave of
// maxmemory × this, so the collector runs harder
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
		// What is resident and not the Go runtime's: the keyspace's
		// blocks, and the binary and mapped files.
		other := s.env.Machine.Keys().OffHeap().Held
		if file, ok := commands.ProcessFileRSS(); ok {
			other += int64(file)
		}
		limit = max(int64(float64(maxmem)*MemoryLimitFactor)-other, minGoMemoryLimit)
	}
	// Changed by a MiB or more (the off-heap blocks move a little all the
	// time): set it.
	if d := limit - s.goMemoryLimit; d > 1<<20 || d < -(1<<20) {
		debug.SetMemoryLimit(limit)
		s.goMemoryLimit = limit
	}
}
