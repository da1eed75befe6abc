package decide

import (
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/policy"
)

// The typed results of a decision, and their RESP form. A door that is
// not RESP (gRPC, HTTP) reads the typed result from the apply's room.Outcome;
// the RESP reply is written from the same value.

// answerCheck answers r, the typed result in the outcome and its reply.
func (x *apply) answerCheck(r room.CheckResult) {
	x.out.Check, x.out.Checked = r, true
	room.WriteCheck(x.w, r)
}

// checkResult is the answer a decided plan gives RL.CHECK: its binding
// limit's result. It records in the apply's outcome what metrics and
// refusal events read.
func (x *apply) checkResult(checks []limitCheck, v verdict) room.CheckResult {
	if v.refused {
		x.out.Limited = true
	}
	if v.binding < 0 {
		return room.NoLimit
	}
	five := x.noteBinding(checks, v.binding, v.refused)
	c := &checks[v.binding]
	return room.CheckResult{Limited: five[0] == 1, Limit: five[1], Remaining: five[2], RetryAfter: five[3], ResetAfter: five[4],
		Name: c.name, Window: c.policyWindow()}
}

// rlsStatus is descriptor desc's status, checked by c (nil: no limit
// applied; unlimited: its rule is unlimited).
func rlsStatus(c *limitCheck, desc rlsDescriptor, unlimited, refused bool, now int64) room.RLSStatus {
	if c == nil {
		s := room.NoRLSLimit
		if unlimited {
			s.Remaining = rlsUnlimitedRemaining
		}
		return s
	}
	shadowRule := c.rule != nil && c.rule.ShadowMode
	s := room.RLSStatus{Code: room.RLSCodeOK, Shadow: c.res.Limited && shadowRule}
	if c.res.Limited && !shadowRule {
		s.Code = room.RLSCodeOverLimit
	}
	s.RequestsPerUnit, s.Unit, s.Multiplier, s.Name = rlsLimit(c, desc)
	if !c.res.Limited {
		s.Remaining = c.res.Remaining
		if refused {
			// Nothing was charged: what remains is what was there.
			s.Remaining = min(s.Remaining+max(c.cost, 0), s.RequestsPerUnit)
		}
	}
	s.ResetSeconds = rlsReset(c, s.Unit.Nanoseconds()*s.Multiplier, now)
	// The quota policy the status's remaining is counted against: requests
	// per unit over the unit, but for GCRA its burst + 1 over the time that
	// takes to refill.
	if c.kind == keyspace.KindGCRA && !c.deny {
		s.PolicyQuota, s.PolicyWindow = c.gcra.MaxBurst+1, c.gcra.PolicyWindow()
	} else {
		s.PolicyQuota, s.PolicyWindow = s.RequestsPerUnit, s.Unit.Nanoseconds()*s.Multiplier/1e9
	}
	return s
}

// rlsLimit is the limit a status reports: requests per unit as the check
// counts them (an RL.OVERRIDE or RL.SCALE applied), the unit whose length
// is its window (the rule's unit when none is) and how many of it
// (unit_multiplier), and the rule's name.
func rlsLimit(c *limitCheck, desc rlsDescriptor) (int64, policy.Unit, int64, string) {
	if desc.unit != policy.NoUnit {
		return desc.limit, desc.unit, desc.mult, ""
	}
	r := c.rule
	limit, window := r.Limit, r.Window
	switch c.kind {
	case keyspace.KindFixedWindow, keyspace.KindSlidingCounter, keyspace.KindSlidingLog:
		limit, window = c.win.Limit, c.win.Window
	case keyspace.KindGCRA:
		limit, window = c.gcra.Count, c.gcra.Period
	case keyspace.KindQuota:
		limit = c.quotaLimit
	}
	// The rule's unit when it is the window; else a unit that is (an
	// override's window); else the rule's unit times how many of it make
	// the window (unit_multiplier).
	unit, mult := r.Unit, int64(1)
	if n := unit.Nanoseconds(); n != window {
		found := false
		for _, u := range rlsUnits {
			if u.Nanoseconds() == window {
				unit, found = u, true
			}
		}
		if !found && n > 0 && window > n && window%n == 0 {
			mult = window / n
		}
	}
	return limit, unit, mult, r.Name
}

// rlsReset is duration_until_reset in seconds. A fixed window (and a limit
// of 0, which Envoy counts in one) resets when its window ends, counted as
// envoyproxy/ratelimit counts it: the window's length less the Unix second
// modulo that length. The other algorithms report their own reset_after.
func rlsReset(c *limitCheck, window, now int64) int64 {
	var windowSeconds int64
	switch {
	case c.kind == keyspace.KindFixedWindow:
		windowSeconds = c.win.Window / 1e9
	case c.deny:
		windowSeconds = window / 1e9
	default:
		return limiter.Seconds(c.res.ResetAfter)
	}
	if windowSeconds <= 0 {
		return 0
	}
	sec := now / 1e9
	return windowSeconds - sec%windowSeconds
}
