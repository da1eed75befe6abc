package rls

import (
	"errors"
	"fmt"
	"strconv"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// errReply is an error reply of the machine command (its text, without
// the '-'), as the leader or this node answered it.
type errReply string

func (e errReply) Error() string { return string(e) }

// errBadReply: a reply that is not RL.SHOULDRATELIMIT's shape (a bug, or a
// leader of another version).
var errBadReply = errors.New("rls: malformed reply")

// parseRESP reads one RESP2 value: int64, string, []any, nil, or errReply.
// It never panics on bad input.
func parseRESP(b []byte) (any, error) {
	v, n, err := parseValue(b, 0)
	if err != nil {
		return nil, err
	}
	if n != len(b) {
		return nil, fmt.Errorf("%w: %d bytes after the reply", errBadReply, len(b)-n)
	}
	return v, nil
}

func parseValue(b []byte, depth int) (any, int, error) {
	if depth > 4 || len(b) < 3 {
		return nil, 0, errBadReply
	}
	end := -1
	for i := 1; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			end = i
			break
		}
	}
	if end < 0 {
		return nil, 0, errBadReply
	}
	line := string(b[1:end])
	next := end + 2
	switch b[0] {
	case '+':
		return line, next, nil
	case '-':
		return errReply(line), next, nil
	case ':':
		v, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			return nil, 0, errBadReply
		}
		return v, next, nil
	case '$':
		n, err := strconv.Atoi(line)
		switch {
		case err != nil || n < -1:
			return nil, 0, errBadReply
		case n == -1:
			return nil, next, nil
		case len(b)-next < n+2:
			return nil, 0, errBadReply
		}
		return string(b[next : next+n]), next + n + 2, nil
	case '*':
		n, err := strconv.Atoi(line)
		if err != nil || n < -1 || n > 1+64 {
			return nil, 0, errBadReply
		}
		if n == -1 {
			return nil, next, nil
		}
		out := make([]any, n)
		for i := range out {
			v, k, err := parseValue(b[next:], depth+1)
			if err != nil {
				return nil, 0, err
			}
			out[i], next = v, next+k
		}
		return out, next, nil
	}
	return nil, 0, errBadReply
}

// responseUnits maps the unit words of a reply to Envoy's enum.
var responseUnits = map[string]pb.RateLimitResponse_RateLimit_Unit{
	"second": pb.RateLimitResponse_RateLimit_SECOND, "minute": pb.RateLimitResponse_RateLimit_MINUTE,
	"hour": pb.RateLimitResponse_RateLimit_HOUR, "day": pb.RateLimitResponse_RateLimit_DAY,
	"week": pb.RateLimitResponse_RateLimit_WEEK, "month": pb.RateLimitResponse_RateLimit_MONTH,
	"year": pb.RateLimitResponse_RateLimit_YEAR,
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

// toDecision turns RL.SHOULDRATELIMIT's reply (parsed) into the response
// for a request of n descriptors.
func toDecision(v any, n int) (decision, error) {
	if e, ok := v.(errReply); ok {
		return decision{}, e
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 1+n {
		return decision{}, fmt.Errorf("%w: want %d elements", errBadReply, 1+n)
	}
	overall, ok := arr[0].(int64)
	if !ok || (overall != int64(pb.RateLimitResponse_OK) && overall != int64(pb.RateLimitResponse_OVER_LIMIT)) {
		return decision{}, fmt.Errorf("%w: overall code %v", errBadReply, arr[0])
	}
	d := decision{resp: &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_Code(overall),
		Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, n)}, quotas: make([]int64, n), windows: make([]int64, n)}
	for i := range n {
		f, ok := arr[1+i].([]any)
		// Nine fields; seven from a leader that predates the policy pair.
		if !ok || (len(f) != 7 && len(f) != 9) {
			return decision{}, fmt.Errorf("%w: status %d", errBadReply, i)
		}
		code, ok1 := f[0].(int64)
		rpu, ok2 := f[1].(int64)
		unit, ok3 := f[2].(string)
		name, ok4 := f[3].(string)
		remaining, ok5 := f[4].(int64)
		reset, ok6 := f[5].(int64)
		shadow, ok7 := f[6].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || remaining < 0 || remaining > maxUint32 {
			return decision{}, fmt.Errorf("%w: status %d fields", errBadReply, i)
		}
		st := &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_Code(code), LimitRemaining: uint32(remaining)}
		if rpu >= 0 {
			st.CurrentLimit = &pb.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: uint32(min(rpu, maxUint32)), Unit: responseUnits[unit]}
			d.quotas[i], d.windows[i] = rpu, unitSeconds[unit]
			if len(f) == 9 {
				q, ok1 := f[7].(int64)
				w, ok2 := f[8].(int64)
				if !ok1 || !ok2 || q < 0 || w < 0 {
					return decision{}, fmt.Errorf("%w: status %d policy", errBadReply, i)
				}
				d.quotas[i], d.windows[i] = q, w
			}
		}
		if reset >= 0 {
			st.DurationUntilReset = &durationpb.Duration{Seconds: reset}
		}
		if shadow != 0 {
			d.shadow++
		}
		d.resp.Statuses[i] = st
	}
	return d, nil
}

// unitSeconds are the units' lengths as Envoy counts them.
var unitSeconds = map[string]int64{"second": 1, "minute": 60, "hour": 3600, "day": 86400,
	"week": 7 * 86400, "month": 30 * 86400, "year": 365 * 86400}
