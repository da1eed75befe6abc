package rls

import (
	"strconv"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluice-rl/sluice/internal/sfield"
)

// The header names envoyproxy/ratelimit adds with
// LIMIT_RESPONSE_HEADERS_ENABLED (its defaults), and the draft-10 pair.
const (
	HeaderLimit     = "RateLimit-Limit"
	HeaderRemaining = "RateLimit-Remaining"
	HeaderReset     = "RateLimit-Reset"
	HeaderPolicy    = "RateLimit-Policy"
	HeaderRateLimit = "RateLimit"
)

// addHeaders fills response_headers_to_add for the descriptor closest to
// its limit, chosen as envoyproxy/ratelimit chooses it: the status with a
// limit and the least remaining, and a descriptor over its limit over any
// other (the last such). Reset is the status's duration_until_reset. No
// descriptor with a limit: no headers.
func addHeaders(d decision) {
	best := -1
	least := uint32(maxUint32)
	for i, st := range d.resp.Statuses {
		if st.CurrentLimit != nil && st.LimitRemaining < least {
			best, least = i, st.LimitRemaining
		}
		if st.Code == pb.RateLimitResponse_OVER_LIMIT && st.CurrentLimit != nil {
			best, least = i, 0
		}
	}
	if best < 0 {
		return
	}
	st := d.resp.Statuses[best]
	reset := st.GetDurationUntilReset().GetSeconds()
	name := st.CurrentLimit.Name
	if sfield.ValidName(name) != nil {
		name = "default"
	}
	rpu := int64(st.CurrentLimit.RequestsPerUnit)
	d.resp.ResponseHeadersToAdd = []*core.HeaderValue{
		{Key: HeaderLimit, Value: strconv.FormatInt(rpu, 10)},
		{Key: HeaderRemaining, Value: strconv.FormatUint(uint64(st.LimitRemaining), 10)},
		{Key: HeaderReset, Value: strconv.FormatInt(reset, 10)},
		{Key: HeaderPolicy, Value: sfield.Policy(name, d.quotas[best], "", d.windows[best])},
		{Key: HeaderRateLimit, Value: sfield.RateLimit(name, int64(st.LimitRemaining), reset)},
	}
}
