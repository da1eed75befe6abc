package rls

import (
	"errors"
	"fmt"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/policy"
)

// errReply is an error answer of the machine command, as the leader or
// this node answered it: its text (the RESP reply's, without the '-'), for
// people, and why, which picks the gRPC code (errorStatus).
type errReply struct {
	msg    string
	reason machine.Reason
}

func (e errReply) Error() string { return e.msg }

// invalidReply is an errReply for a request this door refuses itself.
func invalidReply(msg string) errReply { return errReply{msg, machine.ReasonInvalid} }

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
		return decision{}, errReply{out.Err, out.Reason}
	}
	if len(out.Statuses) != n {
		return decision{}, fmt.Errorf("%w: %d statuses for %d descriptors", errBadReply, len(out.Statuses), n)
	}
	overall := pb.RateLimitResponse_OK
	if out.Limited {
		overall = pb.RateLimitResponse_OVER_LIMIT
	}
	// One allocation per kind of part, not one per descriptor: statuses,
	// their limits and durations each in one array.
	statuses := make([]pb.RateLimitResponse_DescriptorStatus, n)
	limits, durations := 0, 0
	for i := range out.Statuses {
		if out.Statuses[i].HasLimit() {
			limits++
		}
		if out.Statuses[i].ResetSeconds >= 0 {
			durations++
		}
	}
	lims := make([]pb.RateLimitResponse_RateLimit, limits)
	durs := make([]durationpb.Duration, durations)
	policy := make([]int64, 2*n)
	d := decision{resp: &pb.RateLimitResponse{OverallCode: overall, Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, n)},
		quotas: policy[:n:n], windows: policy[n:]}
	for i := range out.Statuses {
		s := &out.Statuses[i]
		st := &statuses[i]
		st.Code, st.LimitRemaining = pb.RateLimitResponse_Code(s.Code), uint32(min(max(s.Remaining, 0), maxUint32))
		if s.HasLimit() {
			l := &lims[0]
			lims = lims[1:]
			l.Name, l.RequestsPerUnit, l.Unit = s.Name, uint32(min(s.RequestsPerUnit, maxUint32)), responseUnits[s.Unit]
			if s.Multiplier > 1 {
				// A window of several units (unit_multiplier): Envoy's
				// field for it, left out for one unit as envoyproxy/ratelimit does.
				l.UnitMultiplier = wrapperspb.UInt32(uint32(min(s.Multiplier, maxUint32)))
			}
			st.CurrentLimit = l
			d.quotas[i], d.windows[i] = s.PolicyQuota, s.PolicyWindow
		}
		if s.ResetSeconds >= 0 {
			du := &durs[0]
			durs = durs[1:]
			du.Seconds = s.ResetSeconds
			st.DurationUntilReset = du
		}
		if s.Shadow {
			d.shadow++
		}
		d.resp.Statuses[i] = st
	}
	return d, nil
}
