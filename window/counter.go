package window

import (
	"unsafe"

	"github.com/sluice-rl/sluice/limiter"
)

// CounterState is the sliding window counter of one key: the units admitted
// in two adjacent fixed sub-windows. Invariants (Check returns ErrCorrupt
// otherwise): Window in (0, MaxWindow]; Start a multiple of Window in
// [0, MaxTime]; Prev, Curr ≥ 0.
type CounterState struct {
	// Window is the window the counts were taken under, in nanoseconds.
	Window int64
	// Start is the start of the sub-window Curr counts (unix ns).
	Start int64
	// Prev is the units admitted in [Start−Window, Start).
	Prev int64
	// Curr is the units admitted in [Start, Start+Window).
	Curr int64
}

func (s CounterState) valid() bool {
	return s.Window > 0 && s.Window <= MaxWindow &&
		s.Start >= 0 && s.Start <= MaxTime && s.Start%s.Window == 0 &&
		s.Prev >= 0 && s.Curr >= 0
}

// Check decides whether cost units may pass at now under p, by the sliding
// window counter: estimate = Prev·(1 − elapsed/Window) + Curr, and the
// request passes if estimate + cost ≤ Limit. exists says whether s is a
// stored state; when false s is ignored.
//
// It returns the key's next state, whether to store it (true exactly when
// units were admitted; otherwise the key must be left as it was, or not
// created), the unix-ns instant the keyspace should delete the key (0 when
// store is false), and the result. Check never modifies s.
func (s CounterState) Check(exists bool, now int64, p Params, cost int64) (CounterState, bool, int64, limiter.Result, error) {
	if err := checkCall(now, p, cost); err != nil {
		return s, false, 0, limiter.Result{}, err
	}
	if exists && s.Window == p.Window && !s.valid() {
		return s, false, 0, limiter.Result{}, ErrCorrupt
	}
	w := p.Window
	st, eff := s.rolled(exists, now, w)
	cur := st.Start
	elapsed := eff - cur
	limitW := mul128(p.Limit, w)
	// used·W = Prev·(W − elapsed) + Curr·W: the estimate scaled by W.
	usedW := mul128(st.Prev, w-elapsed).add(mul128(st.Curr, w))

	res := limiter.Result{Limit: p.Limit, RetryAfter: limiter.Never}
	allowed := cost <= p.Limit && usedW.add(mul128(cost, w)).lessEq(limitW)
	store := false
	expireAt := int64(0)
	if allowed && cost > 0 {
		st.Curr += cost // ≤ Limit, as the test above passed
		usedW = usedW.add(mul128(cost, w))
		store = true
		expireAt = st.Start + 2*w
	}
	res.Limited = !allowed
	if usedW.lessEq(limitW) {
		res.Remaining = limitW.sub(usedW).div(w) // ≤ Limit
	}
	if !allowed && cost <= p.Limit {
		res.RetryAfter = untilInstant(counterPassAt(st, elapsed, p.Limit, cost), now)
	}
	res.ResetAfter = untilInstant(st.emptyAt(), now)
	return st, store, expireAt, res, nil
}

// rolled is the state as of now under a window of w: the stored one moved
// on to the sub-window holding now (or a fresh one), and the instant a
// decision is made at (never before the state's Start: a clock that went
// back keeps the stored sub-window).
func (s CounterState) rolled(exists bool, now, w int64) (CounterState, int64) {
	cur := windowStart(now, w)
	st := CounterState{Window: w, Start: cur}
	if exists && s.Window == w {
		switch {
		case s.Start > cur:
			return s, s.Start
		case s.Start == cur:
			st = s
		case s.Start == cur-w:
			st.Prev = s.Curr
		}
	}
	return st, now
}

// emptyAt is the instant the state no longer holds anything, or 0 if it is
// already empty.
func (s CounterState) emptyAt() int64 {
	switch {
	case s.Curr > 0:
		return s.Start + 2*s.Window
	case s.Prev > 0:
		return s.Start + s.Window
	}
	return 0
}

// counterPassAt is the first instant at which a request of cost ≤ limit
// would pass if nothing else arrives, given that it does not pass at
// Start+elapsed. The estimate only falls with time, so this is exact: one
// nanosecond earlier it would still be refused.
func counterPassAt(s CounterState, elapsed, limit, cost int64) int64 {
	w := s.Window
	// Still in this sub-window at elapsed x: Prev·(W−x) ≤ (limit−Curr−cost)·W,
	// that is x ≥ W − ⌊room·W/Prev⌋.
	if cost <= limit-s.Curr {
		room := limit - s.Curr - cost
		if room >= s.Prev { // would pass already; not reached when refused
			return s.Start + elapsed
		}
		x := w - mul128(room, w).div(s.Prev) // room < Prev, so the quotient < W
		if x < w {
			return s.Start + x
		}
	}
	// In the next sub-window Curr has become the previous count and nothing
	// is current: at elapsed y, Curr·(W−y) ≤ (limit−cost)·W.
	room := limit - cost
	if s.Curr <= room {
		return s.Start + w
	}
	return s.Start + 2*w - mul128(room, w).div(s.Curr)
}

// Bytes is the memory the state holds.
func (s *CounterState) Bytes() int { return int(unsafe.Sizeof(*s)) }
