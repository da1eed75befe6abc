package cluster

import (
	"math"
	"sync"
)

// LeaderClock stamps the entries a leader appends. Time in a sluice
// cluster comes from the log: every entry carries the leader's stamp and
// the state machine applies commands at that instant, never reading a
// clock. A new leader continues from the last stamp it applied plus the
// time its own monotonic clock measured since it took over, so a node whose
// wall clock is ahead or behind cannot make limits expire early or late;
// the integrator makes the leader serve only after a raft Barrier, so the
// last applied stamp is the cluster's last.
//
// A fresh cluster's first leader has no stamp to continue from; the
// integrator passes the wall clock once, at bootstrap.
type LeaderClock struct {
	mono  func() int64 // monotonic nanoseconds
	base  int64        // the last applied stamp when the clock was made
	start int64        // mono() when the clock was made
	mu    sync.Mutex
	last  int64 // the highest stamp returned
}

// NewLeaderClock starts a clock at lastApplied (Unix ns); mono returns a
// monotonic time in nanoseconds from any origin (for example time.Since of
// a fixed instant).
func NewLeaderClock(lastApplied int64, mono func() int64) *LeaderClock {
	return &LeaderClock{mono: mono, base: lastApplied, start: mono(), last: lastApplied}
}

// Stamp returns lastApplied plus the monotonic time elapsed since the
// clock was made. It never returns less than an earlier stamp (a monotonic
// source that steps back is ignored until it passes its old reading) and
// saturates at math.MaxInt64 instead of wrapping. Safe for concurrent use.
func (c *LeaderClock) Stamp() int64 {
	now := c.mono()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = max(c.last, addElapsed(c.base, c.start, now))
	return c.last
}

// addElapsed is base + (now - start), with now before start counting as no
// time passed and every overflow saturating at math.MaxInt64.
func addElapsed(base, start, now int64) int64 {
	if now <= start {
		return base
	}
	// Both differences fit a uint64: now - start is below 2^64, and
	// math.MaxInt64 - base is below 2^64 for any base.
	elapsed := uint64(now) - uint64(start)
	room := uint64(math.MaxInt64) - uint64(base)
	if elapsed >= room {
		return math.MaxInt64
	}
	return int64(uint64(base) + elapsed)
}

// TakeoverBase is where a new leader's clock starts: last, the log's time
// (the last applied stamp plus the monotonic time since it applied), moved
// forward to wall, the leader's wall clock, when the log is behind it — a
// group that was down comes back at real time, as if its limits had kept
// running — but by at most catchUp (a wall clock far ahead cannot expire
// limits by more), and never back: a leader whose wall clock is behind
// the log continues from the log. fresh is a log never stamped: it starts
// at wall. jumped is how far the time moved forward.
func TakeoverBase(last int64, fresh bool, wall int64, catchUp int64) (base, jumped int64) {
	if fresh {
		return wall, 0
	}
	if wall <= last || catchUp <= 0 {
		return last, 0
	}
	jumped = min(wall-last, catchUp)
	return last + jumped, jumped
}
