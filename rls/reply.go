package rls

import (
	"errors"
	"fmt"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/policy"
)

// errReply is an error reply of the machine command (its text, without
// the '-'), as the leader or this node answered it.
type errReply string

func (e errReply) Error() string { return string(e) }

// errBadReply: a leader's reply that is not RL.SHOULDRATELIMIT's shape (a
// bug, or a leader of another version), or a result of the wrong size.
var errBadReply = errors.New("rls: malformed reply")

// responseUnits maps the machine's units to Envoy's enum.
var responseUnits = map[policy.Unit]pb.RateLimitResponse_RateLimit_Unit{
	policy.Second: pb.RateLimitResponse_RateLimit_SECOND, policy.Minute: pb.RateLimitResponse_RateLimit_MINUTE,
	policy.Hour: pb.RateLimitResponse_RateLimit_HOUR, policy.Day: pb.RateLimitResponse_RateLimit_DAY,
	policy.Week: pb.RateLimitResponse_RateLimit_WEEK, policy.Month: pb.RateLimitResponse_RateLimit_MONTH,
	policy.Year: pb.RateLimitResponse_RateLimit_YEAR,
}

// decision is a response and what metrics read of it.
type decision struct {
	resp *pb.RateLimitResponse
	// shadow counts descriptors a shadow-mode rule would have refused.
	shadow int
	// quotas and windows are each status's quota policy (window 0: none),
	// for the RateLimit-Policy header: its remaining never exceeds quota.
	quotas, windows []int64
}

// toDecision formats the typed result of RL.SHOULDRATELIMIT (an error
// reply as errReply) as the response to a request of n descriptors.
func toDecision(out machine.Outcome, n int) (decision, error) {
	if out.Err != "" {
		return decision{}, errReply(out.Err)
	}
	if len(out.Statuses) != n {
		return decision{}, fmt.Errorf("%w: %d statuses for %d descriptors", errBadReply, len(out.Statuses), n)
	}
	overall := pb.RateLimitResponse_OK
	if out.Limited {
		overall = pb.RateLimitResponse_OVER_LIMIT
	}
	d := decision{resp: &pb.RateLimitResponse{OverallCode: overall, Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, n)},
		quotas: make([]int64, n), windows: make([]int64, n)}
	for i := range out.Statuses {
		s := &out.Statuses[i]
		st := &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_Code(s.Code), LimitRemaining: uint32(min(max(s.Remaining, 0), maxUint32))}
		if s.HasLimit() {
			st.CurrentLimit = &pb.RateLimitResponse_RateLimit{Name: s.Name, RequestsPerUnit: uint32(min(s.RequestsPerUnit, maxUint32)), Unit: responseUnits[s.Unit]}
			d.quotas[i], d.windows[i] = s.PolicyQuota, s.PolicyWindow
		}
		if s.ResetSeconds >= 0 {
			st.DurationUntilReset = &durationpb.Duration{Seconds: s.ResetSeconds}
		}
		if s.Shadow {
			d.shadow++
		}
		d.resp.Statuses[i] = st
	}
	return d, nil
}

// unitNames are the unit words of a reply.
var unitNames = map[string]policy.Unit{"": policy.NoUnit, "second": policy.Second, "minute": policy.Minute,
	"hour": policy.Hour, "day": policy.Day, "week": policy.Week, "month": policy.Month, "year": policy.Year}

// fromReply reads the reply a leader sent a forwarding follower (as
// go-redis decodes it: int64, string, []any) into the typed result. It
// never panics on a malformed reply.
func fromReply(v any) (machine.Outcome, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 1 {
		return machine.Outcome{}, fmt.Errorf("%w: not an array", errBadReply)
	}
	overall, ok := arr[0].(int64)
	if !ok || (overall != machine.RLSCodeOK && overall != machine.RLSCodeOverLimit) {
		return machine.Outcome{}, fmt.Errorf("%w: overall code %v", errBadReply, arr[0])
	}
	out := machine.Outcome{Limited: overall == machine.RLSCodeOverLimit, Statuses: make([]machine.RLSStatus, len(arr)-1)}
	for i := range out.Statuses {
		f, ok := arr[1+i].([]any)
		// Nine fields; seven from a leader that predates the policy pair.
		if !ok || (len(f) != 7 && len(f) != 9) {
			return machine.Outcome{}, fmt.Errorf("%w: status %d", errBadReply, i)
		}
		code, ok1 := f[0].(int64)
		rpu, ok2 := f[1].(int64)
		unitWord, ok3 := f[2].(string)
		name, ok4 := f[3].(string)
		remaining, ok5 := f[4].(int64)
		reset, ok6 := f[5].(int64)
		shadow, ok7 := f[6].(int64)
		unit, ok8 := unitNames[unitWord]
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || !ok8 || remaining < 0 || remaining > maxUint32 ||
			(code != machine.RLSCodeOK && code != machine.RLSCodeOverLimit) {
			return machine.Outcome{}, fmt.Errorf("%w: status %d fields", errBadReply, i)
		}
		s := machine.RLSStatus{Code: int(code), RequestsPerUnit: rpu, Unit: unit, Name: name, Remaining: remaining,
			ResetSeconds: reset, Shadow: shadow != 0, PolicyQuota: rpu, PolicyWindow: unit.Nanoseconds() / 1e9}
		if len(f) == 9 {
			q, ok1 := f[7].(int64)
			w, ok2 := f[8].(int64)
			if !ok1 || !ok2 || (rpu >= 0 && (q < 0 || w < 0)) {
				return machine.Outcome{}, fmt.Errorf("%w: status %d policy", errBadReply, i)
			}
			s.PolicyQuota, s.PolicyWindow = q, w
		}
		out.Statuses[i] = s
	}
	return out, nil
}
