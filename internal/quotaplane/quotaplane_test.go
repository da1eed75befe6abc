package quotaplane

import (
	"errors"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func assignment(ttl time.Duration, s *typev3.RateLimitStrategy) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
		QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
			AssignmentTimeToLive: durationpb.New(ttl), RateLimitStrategy: s}}}
}

func tokenBucket(maxTokens, perFill uint32, every time.Duration) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens: maxTokens, TokensPerFill: wrapperspb.UInt32(perFill), FillInterval: durationpb.New(every)}}}
}

// admit is how many of n requests at now the bucket admits.
func admit(b *Bucket, now time.Duration, n int) int {
	got := 0
	for range n {
		if b.Request(now) {
			got++
		}
	}
	return got
}

// Each behaviour of Envoy's filter the model follows, pinned.
func TestBucketFollowsEnvoysCode(t *testing.T) {
	ms := time.Millisecond
	t.Run("a new bucket starts full", func(t *testing.T) {
		var b Bucket
		b.Assign(assignment(10*time.Second, tokenBucket(5, 1, 5*time.Second)), 0)
		if got := admit(&b, 0, 10); got != 5 {
			t.Fatalf("admitted %d of a new bucket of 5", got)
		}
	})
	t.Run("it refills continuously", func(t *testing.T) {
		var b Bucket
		b.Assign(assignment(10*time.Second, tokenBucket(4, 4, time.Second)), 0)
		admit(&b, 0, 4)
		// 4 a second: one token every 250 ms, not 4 at each second.
		if got := admit(&b, 250*ms, 5); got != 1 {
			t.Fatalf("admitted %d 250 ms after emptying at 4/s, want 1", got)
		}
		if got := admit(&b, 750*ms, 5); got != 2 {
			t.Fatalf("admitted %d 500 ms later, want 2", got)
		}
	})
	t.Run("the interval is whole seconds", func(t *testing.T) {
		var b Bucket
		// 2 per 1.9 s is 2 per 1 s to Envoy.
		b.Assign(assignment(10*time.Second, tokenBucket(2, 2, 1900*ms)), 0)
		admit(&b, 0, 2)
		if got := admit(&b, time.Second, 5); got != 2 {
			t.Fatalf("admitted %d a second after emptying at 2 per 1.9 s, want Envoy's 2", got)
		}
		var c Bucket
		if err := c.Assign(assignment(10*time.Second, tokenBucket(2, 2, 900*ms)), 0); !errors.Is(err, ErrSubSecondInterval) {
			t.Fatalf("a fill interval of 900 ms: %v", err)
		}
	})
	t.Run("an identical assignment carries the bucket over", func(t *testing.T) {
		var b Bucket
		b.Assign(assignment(10*time.Second, tokenBucket(3, 1, 10*time.Second)), 0)
		admit(&b, 0, 3)
		b.Assign(assignment(10*time.Second, tokenBucket(3, 1, 10*time.Second)), time.Second)
		if got := admit(&b, time.Second, 3); got != 0 || b.New != 1 {
			t.Fatalf("admitted %d after an identical assignment (%d buckets made), want the spent one kept", got, b.New)
		}
	})
	t.Run("only the interval's nanos are compared", func(t *testing.T) {
		var b Bucket
		b.Assign(assignment(100*time.Second, tokenBucket(1, 1, time.Second)), 0)
		admit(&b, 0, 1)
		// 1 per 10 s differs only in seconds: Envoy keeps 1 per second.
		b.Assign(assignment(100*time.Second, tokenBucket(1, 1, 10*time.Second)), 0)
		if got := admit(&b, time.Second, 1); got != 1 || b.New != 1 {
			t.Fatalf("admitted %d a second later (%d buckets made), want the old rate kept", got, b.New)
		}
		b.Assign(assignment(100*time.Second, tokenBucket(1, 1, 10*time.Second+ms)), time.Second)
		if b.New != 2 || admit(&b, time.Second, 1) != 1 {
			t.Fatalf("a change of nanos: %d buckets made, want a new full one", b.New)
		}
	})
	t.Run("a changed assignment is a new full bucket", func(t *testing.T) {
		var b Bucket
		b.Assign(assignment(10*time.Second, tokenBucket(3, 1, 10*time.Second)), 0)
		admit(&b, 0, 3)
		b.Assign(assignment(10*time.Second, tokenBucket(2, 1, 10*time.Second)), 0)
		if got := admit(&b, 0, 3); got != 2 {
			t.Fatalf("admitted %d after a smaller assignment, want its full 2", got)
		}
	})
	t.Run("ttls are whole seconds; an expired bucket is not carried", func(t *testing.T) {
		var b Bucket
		b.Assign(assignment(1500*ms, tokenBucket(3, 1, 10*time.Second)), 0)
		admit(&b, 0, 3)
		if b.Request(1000 * ms) {
			t.Fatal("admitted at 1 s under a ttl of 1.5 s (Envoy's 1 s)")
		}
		b.Assign(assignment(10*time.Second, tokenBucket(3, 1, 10*time.Second)), 2*time.Second)
		if got := admit(&b, 2*time.Second, 3); got != 3 {
			t.Fatalf("admitted %d of the same bucket after expiry, want a new full one", got)
		}
	})
	t.Run("a blanket rule between makes the next bucket new", func(t *testing.T) {
		var b Bucket
		b.Assign(assignment(10*time.Second, tokenBucket(3, 1, 10*time.Second)), 0)
		admit(&b, 0, 3)
		b.Assign(assignment(10*time.Second, &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}}), 0)
		b.Assign(assignment(10*time.Second, tokenBucket(3, 1, 10*time.Second)), 0)
		if got := admit(&b, 0, 3); got != 3 {
			t.Fatalf("admitted %d, want a new full bucket after DENY_ALL", got)
		}
	})
	t.Run("a report's elapsed time is whole seconds", func(t *testing.T) {
		var b Bucket
		if u := b.Usage(&rlqspb.BucketId{}, 1999*ms); u.GetTimeElapsed().AsDuration() != time.Second {
			t.Fatalf("elapsed %v, want 1 s", u.GetTimeElapsed().AsDuration())
		}
	})
}

// A token bucket admits its tokens, refills continuously, and ends
// with its ttl; no assignment and DENY_ALL deny, ALLOW_ALL admits; the
// report carries the counts since the last and starts them again.
func TestBucketAsTheFilterDecides(t *testing.T) {
	var b Bucket
	if b.Request(0) || b.Describe() != "none" {
		t.Fatal("no assignment admitted")
	}
	tb := &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens: 3, TokensPerFill: wrapperspb.UInt32(2), FillInterval: durationpb.New(time.Second)}}}
	if err := b.Assign(assignment(3*time.Second, tb), 0); err != nil {
		t.Fatal(err)
	}
	got := 0
	for k := range 10 {
		if b.Request(time.Duration(k) * time.Millisecond) {
			got++
		}
	}
	if got != 3 || b.Level(time.Millisecond) >= 1 {
		t.Fatalf("admitted %d of a full bucket of 3", got)
	}
	refilled := 0
	for range 3 {
		if b.Request(time.Second + time.Millisecond) {
			refilled++
		}
	}
	if refilled != 2 {
		t.Fatalf("admitted %d after a fill of 2", refilled)
	}
	if b.Request(3 * time.Second) {
		t.Fatal("admitted after the ttl")
	}
	u := b.Usage(&rlqspb.BucketId{}, time.Second)
	if u.GetNumRequestsAllowed() != 5 || u.GetNumRequestsDenied() != 10 || b.Allowed != 0 || b.Admitted != 5 {
		t.Fatalf("usage %v, admitted %d", u, b.Admitted)
	}
	allow := &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_ALLOW_ALL}}
	b.Assign(assignment(time.Second, allow), 0)
	if !b.Request(0) || b.Describe() != "ALLOW_ALL ttl 1s" {
		t.Fatal("ALLOW_ALL")
	}
	deny := &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}}
	b.Assign(assignment(time.Second, deny), 0)
	if b.Request(0) {
		t.Fatal("DENY_ALL admitted")
	}
	if err := b.Assign(&rlqspb.RateLimitQuotaResponse_BucketAction{}, 0); err == nil {
		t.Fatal("an action that is no assignment was taken")
	}
}
