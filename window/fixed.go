package window

import (
	"unsafe"

	"github.com/sluice-rl/sluice/limiter"
)

// FixedState is the fixed window counter of one key. Invariants (Check
// returns ErrCorrupt otherwise): Window in (0, MaxWindow]; Start a multiple
// of Window in [0, MaxTime]; Count ≥ 0.
type FixedState struct {
	// Window is the window the count was taken under, in nanoseconds.
	Window int64
	// Start is the start of the window Count belongs to (unix ns).
	Start int64
	// Count is the units admitted in [Start, Start+Window).
	Count int64
}

func (s FixedState) valid() bool {
	return s.Window > 0 && s.Window <= MaxWindow &&
		s.Start >= 0 && s.Start <= MaxTime && s.Start%s.Window == 0 &&
		s.Count >= 0
}

// Check decides whether cost units may pass at now under p, counting units
// in fixed windows aligned to multiples of the window since the Unix epoch.
// Its results mean what CounterState.Check's do.
func (s FixedState) Check(exists bool, now int64, p Params, cost int64) (FixedState, bool, int64, limiter.Result, error) {
	if err := checkCall(now, p, cost); err != nil {
		return s, false, 0, limiter.Result{}, err
	}
	if exists && s.Window == p.Window && !s.valid() {
		return s, false, 0, limiter.Result{}, ErrCorrupt
	}
	st := s.rolled(exists, now, p.Window)
	end := st.Start + st.Window

	res := limiter.Result{Limit: p.Limit, RetryAfter: limiter.Never}
	allowed := st.Count <= p.Limit && cost <= p.Limit-st.Count
	store := false
	expireAt := int64(0)
	if allowed && cost > 0 {
		st.Count += cost
		store = true
		expireAt = end
	}
	res.Limited = !allowed
	res.Remaining = remainingUnits(p.Limit, st.Count)
	if !allowed && cost <= p.Limit {
		res.RetryAfter = untilInstant(end, now)
	}
	if st.Count > 0 {
		res.ResetAfter = untilInstant(end, now)
	}
	return st, store, expireAt, res, nil
}

// rolled is the state as of now under a window of w: the stored one in
// the same window (or a later one: the clock went back), else a fresh one.
func (s FixedState) rolled(exists bool, now, w int64) FixedState {
	st := FixedState{Window: w, Start: windowStart(now, w)}
	if exists && s.Window == w && s.Start >= st.Start {
		st = s
	}
	return st
}

// Bytes is the memory the state holds.
func (s *FixedState) Bytes() int { return int(unsafe.Sizeof(*s)) }
