package window

import "github.com/sluice-rl/sluice/limiter"

// Check decides whether cost units may pass at now under p, exactly: the
// request passes if the units admitted in (now − Window, now] plus cost are
// at most Limit. Its results mean what CounterState.Check's do. p.Limit
// above MaxLogLimit is refused with ErrLogLimit.
//
// A now before the newest admission is treated as that instant (time never
// runs backwards for a key), so the log stays in order.
func (s LogState) Check(exists bool, now int64, p Params, cost int64) (LogState, bool, int64, limiter.Result, error) {
	if err := checkCall(now, p, cost); err != nil {
		return s, false, 0, limiter.Result{}, err
	}
	if p.Limit > MaxLogLimit {
		return s, false, 0, limiter.Result{}, ErrLogLimit
	}
	if !exists {
		s = LogState{}
	}
	eff := now
	if s.tailUnits > 0 && s.tail > eff {
		eff = s.tail
	}
	horizon := eff - p.Window
	i := s.firstAfter(horizon)
	used := s.inWindow(i, horizon)

	res := limiter.Result{Limit: p.Limit, RetryAfter: limiter.Never}
	allowed := cost <= p.Limit-used // used ≤ MaxLogLimit-ish, no overflow
	st := s
	store := false
	expireAt := int64(0)
	if allowed && cost > 0 {
		st = s.admit(i, horizon, eff, cost)
		used += cost
		store = true
		expireAt = eff + p.Window
	}
	res.Limited = !allowed
	res.Remaining = remainingUnits(p.Limit, used)
	if !allowed && cost <= p.Limit {
		// used+cost−limit units must leave the window first; there are
		// that many in it because cost ≤ limit.
		res.RetryAfter = untilInstant(s.leaveAt(i, used+cost-p.Limit, p.Window), now)
	}
	if used > 0 {
		res.ResetAfter = untilInstant(st.tail+p.Window, now)
	}
	return st, store, expireAt, res, nil
}
