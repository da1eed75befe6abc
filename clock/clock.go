// Package clock is the server's one source of "now": Unix nanoseconds that
// never go backwards, with a test mode that freezes and advances time so
// end-to-end tests can cross limits without sleeping.
//
// Only the server reads it, once per command; algorithms receive the instant
// as a parameter.
package clock

import (
	"sync/atomic"
	"time"
)

// Source reads the wall clock in Unix nanoseconds.
type Source func() int64

// Wall is the real wall clock.
func Wall() int64 { return time.Now().UnixNano() }

// Clock is a monotonic view of a Source that tests may freeze.
// The zero value is not usable; call New.
type Clock struct {
	source Source
	// last is the largest instant handed out; Now never returns less.
	last atomic.Int64
	// frozen is the instant time is held at, or 0 when following source.
	frozen atomic.Int64
}

// New returns a Clock that follows source (Wall when nil).
func New(source Source) *Clock {
	if source == nil {
		source = Wall
	}
	return &Clock{source: source}
}

// Now returns the current instant in Unix nanoseconds. Successive calls,
// from any goroutine, never return a smaller value.
func (c *Clock) Now() int64 {
	now := c.frozen.Load()
	if now == 0 {
		now = c.source()
	}
	for {
		last := c.last.Load()
		if now <= last {
			return last
		}
		if c.last.CompareAndSwap(last, now) {
			return now
		}
	}
}

// Freeze holds time at ns. An instant before one already handed out is
// raised to it, so time still never goes backwards.
func (c *Clock) Freeze(ns int64) {
	if last := c.last.Load(); ns < last {
		ns = last
	}
	if ns <= 0 {
		ns = 1
	}
	c.frozen.Store(ns)
	c.Now()
}

// Advance moves a frozen clock forward by d nanoseconds (freezing it at the
// current instant first if it was running) and returns the new instant.
func (c *Clock) Advance(d int64) int64 {
	for {
		cur := c.frozen.Load()
		if cur == 0 {
			c.Freeze(c.Now())
			continue
		}
		next := cur + d
		if d < 0 || next < cur {
			next = cur
		}
		if c.frozen.CompareAndSwap(cur, next) {
			return c.Now()
		}
	}
}

// Release returns to following the source. Time stays monotonic: until the
// source passes the last frozen instant, Now keeps returning that instant.
func (c *Clock) Release() {
	c.frozen.Store(0)
}

// Frozen reports whether the clock is held by Freeze or Advance.
func (c *Clock) Frozen() bool { return c.frozen.Load() != 0 }
