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
