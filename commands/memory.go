package commands

import (
	"runtime/metrics"
	"sync/atomic"

	"github.com/sluice-rl/sluice/machine"
)

// Memory is what the server's memory limits read: the process' use,
// sampled a few times a second by the server (Env.SampleMemory), and what
// the limits refused. Reading it costs an atomic load, so every command
// that may store can ask.
type Memory struct {
	// Used is used_memory: the Go heap's live objects (as the last
	// collection found them) plus the keyspace's off-heap blocks.
	Used atomic.Int64
	// Clients is used_memory_clients: every client connection's buffers,
	// unsent replies and unparsed requests (set by the server).
	Clients atomic.Int64
	// RejectedOOM counts commands refused over maxmemory; EvictedClients
	// connections closed over maxmemory-clients.
	RejectedOOM    atomic.Int64
	EvictedClients atomic.Int64
}

// ErrOOM is Redis' reply to a command that would store more over
// maxmemory.
const ErrOOM = "OOM command not allowed when used memory > 'maxmemory'."

// The runtime metrics of the heap's live bytes (as the last collection
// marked them) and of its objects (live and not yet collected), which
// stands in until the first collection.
const (
	heapLive    = "/gc/heap/live:bytes"
	heapObjects = "/memory/classes/heap/objects:bytes"
)

// MemoryUse reads used_memory now: the heap's live bytes and the
// keyspace's off-heap bytes, less the member port's transport buffers
// (Env.Transport: the network's, not the keyspace's — 2,000 Raft
// connections are 520 MB of them, mostly never touched).
func (e *Env) MemoryUse() (used, heap, offHeap int64) {
	s := []metrics.Sample{{Name: heapLive}, {Name: heapObjects}}
	metrics.Read(s)
	for _, m := range s {
		if heap == 0 && m.Value.Kind() == metrics.KindUint64 {
			heap = int64(m.Value.Uint64())
		}
	}
	if e.Transport != nil {
		heap = max(heap-e.Transport(), 0)
	}
	offHeap = e.Machine.Keys().OffHeap().Allocated
	return heap + offHeap, heap, offHeap
}

// SampleMemory refreshes Memory.Used; the server calls it on its tick.
func (e *Env) SampleMemory() {
	used, _, _ := e.MemoryUse()
	e.Memory.Used.Store(used)
}

// overMaxMemory reports whether used memory passed maxmemory (0: none).
func (e *Env) overMaxMemory() bool {
	limit := e.Tunables.MaxMemory.Load()
	return limit > 0 && e.Memory.Used.Load() > limit
}

// refusedOOM answers OOM to a command that would store more while the
// server is over maxmemory, and reports whether it did. A malformed
// command is left to its own error; one that only changes what exists
// goes on (a limiter keeps limiting the keys it has). Callers ask only for
// a command flagged denyoom, where it would be applied or queued (a
// follower redirects first: the leader's memory decides).
func (c *Ctx) refusedOOM(cmd *Command, args [][]byte) bool {
	if !c.Env.overMaxMemory() || cmd.Machine.Check(args) != "" ||
		!c.Env.Machine.Stores(cmd.Machine, args, c.readInstant()) {
		return false
	}
	c.Env.Memory.RejectedOOM.Add(1)
	c.txRefused()
	c.refuse(machine.ReasonOutOfMemory, ErrOOM)
	return true
}

// MaxMemoryClients is the budget of every client's buffers together: the
// configured one, else a share of maxmemory, else the default.
func (e *Env) MaxMemoryClients() int64 {
	if n := e.Tunables.MaxMemoryClients.Load(); n > 0 {
		return n
	}
	if m := e.Tunables.MaxMemory.Load(); m > 0 {
		return max(m/4, 32<<20)
	}
	return DefaultMaxMemoryClients
}

// DefaultMaxMemoryClients is maxmemory-clients with neither it nor
// maxmemory set: 128 MiB. Replies a client does not read are garbage once
// it is closed, and the collector lets the heap reach twice what is live
// before it runs, so the process may hold about twice the budget: 4
// clients pipelining without reading peaked at 586 MB of RSS with 256 MiB.
const DefaultMaxMemoryClients = 128 << 20
