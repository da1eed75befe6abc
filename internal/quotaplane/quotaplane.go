// Package quotaplane is a data plane as Envoy's rate_limit_quota filter
// is, for the tests of sluice's Rate Limit Quota Service (RLQS): no Envoy
// binary runs here, so the tests speak RLQS with this model, written from
// the proto and the filter's documentation. A Bucket decides each request
// from its assignment — a blanket rule, or a token bucket that a new
// assignment replaces full and that refills every fill interval — denies
// when it has none or it expired (no_assignment_behavior and
// expired_assignment_behavior set to deny), and counts what it allowed and
// denied for the next usage report. Time is given, so tests can run on a
// simulated clock.
package quotaplane

import (
	"errors"
	"fmt"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ErrNotAssignment: an action that is not a quota assignment.
var ErrNotAssignment = errors.New("quotaplane: not a quota assignment")

// Bucket is one bucket's state in the data plane.
type Bucket struct {
	// The assignment: its rule, when it ends, a token bucket's state.
	rule                 string // "", "allow", "deny", "tokens"
	until                time.Duration
	max, perFill, tokens int64
	fillEvery, lastFill  time.Duration
	// Allowed and Denied count the requests since the last report;
	// Admitted all it ever allowed.
	Allowed, Denied uint64
	Admitted        int64
	// Last is the last assignment taken (nil: none).
	Last *rlqspb.RateLimitQuotaResponse_BucketAction
}

// Request decides one request at now.
func (b *Bucket) Request(now time.Duration) bool {
	ok := false
	if b.rule != "" && now < b.until {
		switch b.rule {
		case "allow":
			ok = true
		case "tokens":
			if b.fillEvery > 0 && now-b.lastFill >= b.fillEvery {
				n := int64((now - b.lastFill) / b.fillEvery)
				b.tokens = min(b.max, b.tokens+n*b.perFill)
				b.lastFill += time.Duration(n) * b.fillEvery
			}
			if b.tokens > 0 {
				b.tokens--
				ok = true
			}
		}
	}
	if ok {
		b.Allowed++
		b.Admitted++
	} else {
		b.Denied++
	}
	return ok
}

// Usage is the bucket's usage report since the last (elapsed long); the
// counts start again.
func (b *Bucket) Usage(id *rlqspb.BucketId, elapsed time.Duration) *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
	u := &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: id, TimeElapsed: durationpb.New(elapsed),
		NumRequestsAllowed: b.Allowed, NumRequestsDenied: b.Denied}
	b.Allowed, b.Denied = 0, 0
	return u
}

// Assign takes an assignment at now.
func (b *Bucket) Assign(a *rlqspb.RateLimitQuotaResponse_BucketAction, now time.Duration) error {
	qa := a.GetQuotaAssignmentAction()
	if qa == nil {
		return fmt.Errorf("%w: %v", ErrNotAssignment, a)
	}
	b.Last = a
	b.until = now + qa.GetAssignmentTimeToLive().AsDuration()
	switch s := qa.GetRateLimitStrategy(); {
	case s.GetTokenBucket() != nil:
		tb := s.GetTokenBucket()
		b.rule, b.max, b.perFill, b.fillEvery = "tokens", int64(tb.GetMaxTokens()), int64(tb.GetTokensPerFill().GetValue()), tb.GetFillInterval().AsDuration()
		b.tokens, b.lastFill = b.max, now
	case s.GetBlanketRule() == typev3.RateLimitStrategy_ALLOW_ALL:
		b.rule = "allow"
	default:
		b.rule = "deny"
	}
	return nil
}

// Tokens is what a token bucket assignment holds now (0 for others).
func (b *Bucket) Tokens(now time.Duration) int64 {
	if b.rule != "tokens" || now >= b.until {
		return 0
	}
	return b.tokens
}

// Describe is the last assignment as "<rule> ttl <ttl>", the rule
// token_bucket(<max tokens>), ALLOW_ALL or DENY_ALL; "none" before any.
func (b *Bucket) Describe() string {
	if b.Last == nil {
		return "none"
	}
	qa := b.Last.GetQuotaAssignmentAction()
	s := qa.GetRateLimitStrategy()
	rule := s.GetBlanketRule().String()
	if tb := s.GetTokenBucket(); tb != nil {
		rule = fmt.Sprintf("token_bucket(%d)", tb.GetMaxTokens())
	}
	return fmt.Sprintf("%s ttl %v", rule, qa.GetAssignmentTimeToLive().AsDuration())
}
