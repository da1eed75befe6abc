package machine

import (
	"errors"
	"fmt"

	"github.com/sluice-rl/sluice/policy"
)

// Replies as a RESP client decodes them, read back into the typed results:
// what a follower forwarding for Envoy's door, and a coordinator asking
// each group for its part, get from another node.

// ErrBadReply: a reply that is not the command's shape (a bug, or a node of
// another version).
var ErrBadReply = errors.New("machine: malformed reply")

// ReadCheckReply reads an RL.CHECK reply (as go-redis decodes it).
func ReadCheckReply(v any) (CheckResult, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 7 {
		return CheckResult{}, fmt.Errorf("%w: RL.CHECK answers 7 elements", ErrBadReply)
	}
	var n [5]int64
	for i := range n {
		x, ok := arr[i].(int64)
		if !ok {
			return CheckResult{}, fmt.Errorf("%w: element %d of an RL.CHECK reply is not an integer", ErrBadReply, i)
		}
		n[i] = x
	}
	name, ok1 := arr[5].(string)
	window, ok2 := arr[6].(int64)
	if !ok1 || !ok2 {
		return CheckResult{}, fmt.Errorf("%w: an RL.CHECK reply's name or window", ErrBadReply)
	}
	return CheckResult{Limited: n[0] == 1, Limit: n[1], Remaining: n[2], RetryAfter: n[3], ResetAfter: n[4], Name: name, Window: window}, nil
}

// replyUnits are the unit words of a reply.
var replyUnits = map[string]policy.Unit{"": policy.NoUnit, "second": policy.Second, "minute": policy.Minute,
	"hour": policy.Hour, "day": policy.Day, "week": policy.Week, "month": policy.Month, "year": policy.Year}

// ReadRLSReply reads an RL.SHOULDRATELIMIT reply as a RESP client
// decodes it (go-redis: int64, string, []any) — a leader's to a forwarding
// follower, a group's part to its coordinator — into the typed result. It
// never panics on a malformed reply.
func ReadRLSReply(v any) (Outcome, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 1 {
		return Outcome{}, fmt.Errorf("%w: not an array", ErrBadReply)
	}
	overall, ok := arr[0].(int64)
	if !ok || (overall != RLSCodeOK && overall != RLSCodeOverLimit) {
		return Outcome{}, fmt.Errorf("%w: overall code %v", ErrBadReply, arr[0])
	}
	out := Outcome{Limited: overall == RLSCodeOverLimit, Statuses: make([]RLSStatus, len(arr)-1)}
	for i := range out.Statuses {
		f, ok := arr[1+i].([]any)
		// Nine fields; seven from a leader that predates the policy pair.
		if !ok || (len(f) != 7 && len(f) != 9) {
			return Outcome{}, fmt.Errorf("%w: status %d", ErrBadReply, i)
		}
		code, ok1 := f[0].(int64)
		rpu, ok2 := f[1].(int64)
		unitWord, ok3 := f[2].(string)
		name, ok4 := f[3].(string)
		remaining, ok5 := f[4].(int64)
		reset, ok6 := f[5].(int64)
		shadow, ok7 := f[6].(int64)
		unit, ok8 := replyUnits[unitWord]
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || !ok8 || remaining < 0 || remaining > maxRLSValue ||
			(code != RLSCodeOK && code != RLSCodeOverLimit) {
			return Outcome{}, fmt.Errorf("%w: status %d fields", ErrBadReply, i)
		}
		s := RLSStatus{Code: int(code), RequestsPerUnit: rpu, Unit: unit, Name: name, Remaining: remaining,
			ResetSeconds: reset, Shadow: shadow != 0, PolicyQuota: rpu, PolicyWindow: unit.Nanoseconds() / 1e9}
		if len(f) == 9 {
			q, ok1 := f[7].(int64)
			w, ok2 := f[8].(int64)
			if !ok1 || !ok2 || (rpu >= 0 && (q < 0 || w < 0)) {
				return Outcome{}, fmt.Errorf("%w: status %d policy", ErrBadReply, i)
			}
			s.PolicyQuota, s.PolicyWindow = q, w
		}
		out.Statuses[i] = s
	}
	return out, nil
}
