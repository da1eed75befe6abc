package quotaplane

import (
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

// A token bucket admits its tokens, refills each fill interval, and ends
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
	if got != 3 || b.Tokens(time.Millisecond) != 0 {
		t.Fatalf("admitted %d of a full bucket of 3", got)
	}
	refilled := 0
	for range 3 {
		if b.Request(time.Second) {
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
