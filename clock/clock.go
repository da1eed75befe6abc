// Package clock is the server's one source of "now": Unix nanoseconds that
// never go backwards, with a test mode that freezes and advances time so
// end-to-end tests can cross limits without sleeping.
//
// Only the server reads it, once per command; algorithms receive the instant
// as a parameter.
package clock

import (
	"errors"
	"math"
	"sync/atomic"
	"time"
)

// Errors the test clock returns.
var (
	// ErrBackwards: an instant earlier than one already handed out.
	ErrBackwards = errors.New("clock: instant is before the current one")
	// ErrOverflow: an advance past the largest int64 instant, or a
	// negative one.
	ErrOverflow = errors.New("clock: advance overflows the clock")
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

// Freeze holds time at ns, which must not be before an instant already
// handed out (ErrBackwards: time never goes backwards, and a test that
// asks for it should hear so rather than be silently clamped).
func (c *Clock) Freeze(ns int64) error {
	if ns <= 0 {
		return ErrBackwards
	}
	for {
		last := c.last.Load()
		if ns < last {
			return ErrBackwards
		}
		if c.last.CompareAndSwap(last, ns) {
			c.frozen.Store(ns)
			return nil
		}
	}
}

// Advance moves the clock forward by d nanoseconds and returns the new
// instant. A running clock is frozen first, at its current instant: from
// then on only Advance, Freeze or Release move it (documented in the
// README's "Test clock"). A negative d or one past the largest instant is
// ErrOverflow, and the clock stays where it was.
func (c *Clock) Advance(d int64) (int64, error) {
	if d < 0 {
		return 0, ErrOverflow
	}
	for {
		cur := c.frozen.Load()
		if cur == 0 {
			cur = c.Now()
			if !c.frozen.CompareAndSwap(0, cur) {
				continue
			}
		}
		if cur > math.MaxInt64-d {
			return 0, ErrOverflow
		}
		if c.frozen.CompareAndSwap(cur, cur+d) {
			return c.Now(), nil
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
