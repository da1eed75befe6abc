// Package quotaplane is a data plane as Envoy's rate_limit_quota filter
// is, for the tests of sluice's Rate Limit Quota Service (RLQS): no Envoy
// binary runs here, so the tests speak RLQS with this model. It follows
// what the filter's code does with an assignment (Envoy 1.37,
// source/extensions/filters/http/rate_limit_quota/global_client_impl.cc,
// and AtomicTokenBucketImpl in source/common/common/token_bucket_impl.cc),
// not what the proto's comments suggest:
//
//   - A token bucket assignment makes a **new bucket that starts full**
//     unless the last assignment was a token bucket equal to it — Envoy
//     compares max_tokens, tokens_per_fill and only the **nanos** of
//     fill_interval — in which case the old bucket, and the tokens it
//     has, carries over unrefilled.
//   - A bucket refills **continuously** at tokens_per_fill / fill_interval,
//     the interval counted in **whole seconds** (absl::ToInt64Seconds, so
//     1.9 s is 1 s, and under 1 s Envoy divides by zero: refused here).
//   - An assignment lasts assignment_time_to_live's whole seconds; then
//     the expired_assignment_behavior (deny, as the README's filter
//     config sets it) applies, and the next token bucket is new.
//   - A blanket rule (ALLOW_ALL, DENY_ALL) replaces a token bucket; the one
//     after it is new.
//   - A usage report's time_elapsed is whole seconds, truncated.
//
// Time is given, so tests run on a simulated clock; the bucket's
// arithmetic is float64 seconds, as Envoy's is.
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

// ErrSubSecondInterval: a token bucket whose fill interval is under a
// whole second, which Envoy turns into a division by zero.
var ErrSubSecondInterval = errors.New("quotaplane: a token bucket's fill_interval under 1 s (Envoy divides by zero)")

// Bucket is one bucket's state in the data plane.
type Bucket struct {
	// The assignment: its rule, when it ends, the token bucket it set.
	rule  string // "", "allow", "deny", "tokens"
	until time.Duration
	tb    *typev3.TokenBucket
	// The token bucket's state, as AtomicTokenBucketImpl keeps it: its
	// size and rate (tokens a second), and the instant (seconds) from
	// which it would have refilled to what it holds.
	max, rate, from float64
	// Allowed and Denied count the requests since the last report;
	// Admitted all it ever allowed; New how many token buckets were made
	// (each started full), NewTokens what they started with together.
	Allowed, Denied uint64
	Admitted        int64
	New             int
	NewTokens       int64
	// Last is the last assignment taken (nil: none).
	Last *rlqspb.RateLimitQuotaResponse_BucketAction
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// expire applies the expired assignment's behaviour at now: deny, with no
// token bucket cached.
func (b *Bucket) expire(now time.Duration) {
	if b.rule != "" && now >= b.until {
		b.rule, b.tb = "deny", nil
	}
}

// Request decides one request at now.
func (b *Bucket) Request(now time.Duration) bool {
	b.expire(now)
	ok := false
	switch b.rule {
	case "allow":
		ok = true
	case "tokens":
		if t := seconds(now); t > b.from {
			if total := min(b.max, (t-b.from)*b.rate); total >= 1 {
				b.from = t - (total-1)/b.rate
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

// Usage is the bucket's usage report since the last (elapsed long, sent
// in whole seconds); the counts start again.
func (b *Bucket) Usage(id *rlqspb.BucketId, elapsed time.Duration) *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
	u := &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: id, TimeElapsed: durationpb.New(elapsed.Truncate(time.Second)),
		NumRequestsAllowed: b.Allowed, NumRequestsDenied: b.Denied}
	b.Allowed, b.Denied = 0, 0
	return u
}

// sameTokenBucket is Envoy's comparison of two token buckets.
func sameTokenBucket(a, b *typev3.TokenBucket) bool {
	return a.GetMaxTokens() == b.GetMaxTokens() && a.GetTokensPerFill().GetValue() == b.GetTokensPerFill().GetValue() &&
		a.GetFillInterval().GetNanos() == b.GetFillInterval().GetNanos()
}

// Assign takes an assignment at now.
func (b *Bucket) Assign(a *rlqspb.RateLimitQuotaResponse_BucketAction, now time.Duration) error {
	qa := a.GetQuotaAssignmentAction()
	if qa == nil {
		return fmt.Errorf("%w: %v", ErrNotAssignment, a)
	}
	b.expire(now)
	s := qa.GetRateLimitStrategy()
	if tb := s.GetTokenBucket(); tb != nil {
		if b.tb == nil || !sameTokenBucket(tb, b.tb) {
			every := tb.GetFillInterval().AsDuration() / time.Second // whole seconds
			if every <= 0 {
				return fmt.Errorf("%w: %v", ErrSubSecondInterval, tb.GetFillInterval().AsDuration())
			}
			b.max = float64(tb.GetMaxTokens())
			b.rate = float64(tb.GetTokensPerFill().GetValue()) / float64(every)
			b.from = seconds(now) - b.max/b.rate // full
			b.New++
			b.NewTokens += int64(tb.GetMaxTokens())
		}
		b.rule, b.tb = "tokens", tb
	} else {
		b.tb = nil
		if s.GetBlanketRule() == typev3.RateLimitStrategy_ALLOW_ALL {
			b.rule = "allow"
		} else {
			b.rule = "deny"
		}
	}
	b.Last = a
	b.until = now + time.Duration(qa.GetAssignmentTimeToLive().GetSeconds())*time.Second
	return nil
}

// Level is what a token bucket assignment holds now, fractions too (0
// for others): a fraction becomes a whole token before any more does.
func (b *Bucket) Level(now time.Duration) float64 {
	if b.rule != "tokens" || now >= b.until {
		return 0
	}
	return min(b.max, max(0, seconds(now)-b.from)*b.rate)
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
