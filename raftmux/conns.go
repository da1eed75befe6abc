package raftmux

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// heldConn is a connection the mux counts until it is closed.
type heldConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

// NetConn is the connection underneath.
func (c *heldConn) NetConn() net.Conn { return c.Conn }

func (c *heldConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}

// RaftConnBuffer is what hashicorp/raft's network transport allocates for
// each connection it reads or writes: a 256 KB buffer one way (the
// reader on an accepted connection, the writer on a dialed one) and a
// 4 KB one the other.
const RaftConnBuffer = 256<<10 + 4<<10

// RaftBufferBytes is what Raft's transport holds in buffers for the
// connections this mux carries: heap that is not the keyspace's, which
// used_memory leaves out (most of it never touched, so never resident).
func (m *Mux) RaftBufferBytes() int64 { return m.raft.Load() * RaftConnBuffer }

// countRaft counts c among the Raft connections until it is closed.
func (m *Mux) countRaft(c net.Conn) net.Conn {
	m.raft.Add(1)
	return &heldConn{Conn: c, open: &m.raft}
}

// replayConn gives back the first byte the mux read to see that the
// connection carries something, then reads on.
type replayConn struct {
	net.Conn
	first byte
	has   bool
}

// NetConn is the connection underneath (a *tls.Conn with TLS).
func (c *replayConn) NetConn() net.Conn { return c.Conn }

func (c *replayConn) Read(p []byte) (int, error) {
	if c.has && len(p) > 0 {
		p[0], c.has = c.first, false
		return 1, nil
	}
	return c.Conn.Read(p)
}

// Why a connection was refused.
type refusal int

const (
	refusedAccept  refusal = iota // Accept failed (out of descriptors)
	refusedFull                   // MaxConns held
	refusedPending                // MaxPending pending
	refusedHeader                 // no header within the handshake
	refusedGroup                  // a group this process does not host
	refusedProof                  // the cluster's secret not proven
	refusedTLS                    // the TLS handshake failed
	refusedSilent                 // nothing sent after the handshake
	refusedVersion                // a header of a version this member does not read
	refusalKinds
)

var refusalNames = [refusalKinds]string{"accept_failed", "over_max_conns", "over_max_pending", "no_header",
	"group_not_hosted", "not_proven", "tls_failed", "silent", "bad_version"}

// refusals counts refused connections and says so at most once per
// refusalLogEvery, with the counts since it last spoke and the last
// peer's address — never bytes a peer sent, so a flood writes a line, not
// a line a connection.
type refusals struct {
	mu     sync.Mutex
	counts [refusalKinds]int64
	total  [refusalKinds]atomic.Int64
	last   net.Addr
	said   time.Time
}

// refusalLogEvery is how often refused connections are said.
const refusalLogEvery = 10 * time.Second

func (r *refusals) note(log *slog.Logger, why refusal, from net.Addr) {
	r.total[why].Add(1)
	r.mu.Lock()
	r.counts[why]++
	if from != nil {
		r.last = from
	}
	now := time.Now()
	if now.Sub(r.said) < refusalLogEvery {
		r.mu.Unlock()
		return
	}
	attrs := make([]any, 0, 2*refusalKinds+2)
	for k, n := range r.counts {
		if n > 0 {
			attrs = append(attrs, refusalNames[k], n)
		}
	}
	if r.last != nil {
		attrs = append(attrs, "last_from", r.last.String())
	}
	r.counts, r.said = [refusalKinds]int64{}, now
	r.mu.Unlock()
	log.Warn("raftmux: member port connections refused and closed", attrs...)
}

// Refused is how many connections the mux refused, by reason (the names
// of the log line).
func (m *Mux) Refused() map[string]int64 {
	out := make(map[string]int64, refusalKinds)
	for k := range refusalKinds {
		out[refusalNames[k]] = m.refusals.total[k].Load()
	}
	return out
}
