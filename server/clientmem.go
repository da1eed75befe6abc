package server

import "runtime/debug"

// The memory of every client's buffers together is bounded by
// maxmemory-clients, as in Redis 7: the per-client output limit alone let
// 4 clients that pipelined without reading take 5.6 GB between them. What
// is counted is the replies queued for clients that do not take them as
// fast as they come (output.unsent, summed in Server.clientBytes as they
// are queued and sent: nothing is counted while sockets take replies at
// once) and, for the connection running a batch, the replies the batch has
// built so far, and the request a connection is still receiving past the
// read buffer's usual size (a large bulk, as Redis counts query buffers).
// Past the budget the connection holding the most is closed and its
// replies dropped.

// overClientBudget reports whether the connection's batch, with every
// client's queued replies, passes maxmemory-clients. It runs after each
// command: two atomic loads.
func (s *Server) overClientBudget(cs *connState) bool {
	return s.clientBytes.Load()+int64(len(cs.writer.Buf)) > s.env.MaxMemoryClients()
}

// closeLargestClient, past maxmemory-clients, closes the connection holding
// the most buffered replies. self (nil: none) is the connection whose batch
// the caller runs: if it holds the most, closeLargestClient reports true
// and the caller closes it; another is closed here.
func (s *Server) closeLargestClient(self *connState) bool {
	total := s.clientBytes.Load()
	own := 0
	if self != nil {
		own = len(self.writer.Buf) + self.out.queuedBytes()
		total += int64(len(self.writer.Buf))
	}
	if total <= s.env.MaxMemoryClients() {
		return false
	}
	largest, most := s.largestClient(self)
	if largest == nil || most <= own {
		if self == nil {
			return false
		}
		s.env.Memory.EvictedClients.Add(1)
		s.log.Warn("closing the client with the largest buffers: maxmemory-clients reached", "addr", self.conn.Addr,
			"bytes", own, "clients_bytes", total)
		s.giveBack(own)
		return true
	}
	s.evictClient(largest, most, total)
	return false
}

// largestClient is the connection other than self holding the most
// (queued replies and a large request being received), and how many
// bytes; nil when none holds any.
func (s *Server) largestClient(self *connState) (*connState, int) {
	var largest *connState
	most := 0
	for _, cs := range s.clients.snapshot() {
		if cs == self || cs.reg.killed.Load() {
			continue
		}
		if n := cs.out.queuedBytes() + int(cs.reg.requestBytes.Load()); n > most {
			largest, most = cs, n
		}
	}
	return largest, most
}

// countRequestBuffer follows the size of a connection's read buffer past
// its usual size into the clients' total, after each read; a connection
// receiving a request larger than the budget is closed like one that does
// not read its replies.
func (s *Server) countRequestBuffer(cs *connState) {
	if cs.reg.killed.Load() {
		return // closed, its count released (evictClient)
	}
	size := int64(cs.framer.Size())
	if size <= requestBufferFree {
		size = 0
	}
	if d := size - cs.reg.requestBytes.Load(); d != 0 {
		cs.reg.requestBytes.Store(size)
		if s.clientBytes.Add(d) > s.env.MaxMemoryClients() && d > 0 {
			s.evictOverBudget()
		}
	}
}

// requestBufferFree is the read buffer a connection holds without its being
// counted: the framer keeps up to this much between requests.
const requestBufferFree = 64 << 10

// releaseRequestBuffer takes a closed connection's request buffer out of the
// clients' total.
func (s *Server) releaseRequestBuffer(cs *connState) {
	if n := cs.reg.requestBytes.Swap(0); n != 0 {
		s.clientBytes.Add(-n)
	}
}

// evictClient closes cs, which holds bytes of the total, from a goroutine
// other than the one running its commands: its queued replies are dropped
// at once.
func (s *Server) evictClient(cs *connState, bytes int, total int64) {
	if !cs.reg.killed.CompareAndSwap(false, true) {
		return
	}
	s.env.Memory.EvictedClients.Add(1)
	s.log.Warn("closing the client with the largest buffers: maxmemory-clients reached", "addr", cs.conn.Addr,
		"bytes", bytes, "clients_bytes", total)
	cs.out.abandon()
	cs.reg.nc.Close()
	s.clients.uncount(cs)
	s.releaseRequestBuffer(cs) // its loop drops the buffer as it sees the close
	s.giveBack(bytes)
}

// evictOverBudget closes the connections holding the most, largest first,
// until every client's queued replies fit maxmemory-clients again (the
// tick's part, and a publisher's: replies no batch is running for).
func (s *Server) evictOverBudget() {
	for range maxEvictions {
		total := s.clientBytes.Load()
		if total <= s.env.MaxMemoryClients() {
			return
		}
		cs, bytes := s.largestClient(nil)
		if cs == nil {
			return
		}
		s.evictClient(cs, bytes, total)
	}
}

// maxEvictions bounds the connections one evictOverBudget closes.
const maxEvictions = 64

// giveBack returns a closed client's buffers to the system at once when
// they were large: left to the collector's pace they would stay resident
// until the heap doubled again, and a flood of such clients would hold
// twice the budget.
func (s *Server) giveBack(bytes int) {
	if bytes < giveBackAbove || !s.givingBack.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.givingBack.Store(false)
		debug.FreeOSMemory()
	}()
}

// giveBackAbove is the size of a closed client's buffers worth a
// collection of their own.
const giveBackAbove = 16 << 20

// sampleClientMemory publishes used_memory_clients and enforces the budget
// on the tick.
func (s *Server) sampleClientMemory() {
	s.env.Memory.Clients.Store(s.clientBytes.Load())
	s.evictOverBudget()
}
