package tests

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Issue #47's unit_multiplier: a rule of 5 per 30 seconds (unit: second,
// unit_multiplier: 30) limits per 30 s window through RL.CHECK and Envoy's
// ShouldRateLimit, whose current_limit says so; /metrics shows the rule's
// limit in force and its window.
func TestUnitMultiplierLimitsPerWindowOfUnits(t *testing.T) {
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	s := StartServer(t, "--grpc-addr", grpcAddr, "--http-addr", httpAddr, "--rules", writeRules(t, "m.yaml", `domain: m
descriptors:
  - key: k
    rate_limit: {name: per-30s, unit: second, unit_multiplier: 30, requests_per_unit: 5}
`))
	c := s.Client()
	// The start of a 30 s window (fixed windows are aligned to the epoch).
	start := (time.Now().Add(time.Hour).UnixNano() / 30e9) * 30e9
	if err := c.Do(ctx(t), "DEBUG", "CLOCK", "SET", start).Err(); err != nil {
		t.Fatal(err)
	}
	check := func() []any {
		v, err := c.Do(ctx(t), "RL.CHECK", "m", "DESCRIPTOR", "k", "x").Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for i := range 5 {
		if v := check(); v[0] != int64(0) || v[6] != int64(30) || v[5] != "per-30s" {
			t.Fatalf("request %d: %v, want allowed in a 30 s window", i, v)
		}
	}
	if v := check(); v[0] != int64(1) {
		t.Fatalf("the 6th: %v", v)
	}
	advance := func(d time.Duration) {
		if err := c.Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", int64(d)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	advance(10 * time.Second)
	if v := check(); v[0] != int64(1) {
		t.Fatalf("10 s later, in the same 30 s window: %v", v)
	}
	advance(20 * time.Second)
	if v := check(); v[0] != int64(0) {
		t.Fatalf("in the next window: %v", v)
	}
	rc, _ := rlsClient(t, grpcAddr)
	resp, err := rc.ShouldRateLimit(ctx(t), rlsRequest("m", 1, "k=y"))
	if err != nil {
		t.Fatal(err)
	}
	st := resp.GetStatuses()[0]
	l := st.GetCurrentLimit()
	if l.GetRequestsPerUnit() != 5 || l.GetUnit() != pb.RateLimitResponse_RateLimit_SECOND || l.GetUnitMultiplier().GetValue() != 30 || l.GetName() != "per-30s" {
		t.Fatalf("current_limit %v", l)
	}
	if d := st.GetDurationUntilReset().AsDuration(); d != 30*time.Second {
		t.Fatalf("duration_until_reset %v at a window's start, want 30s", d)
	}
	// The rule's limit in force and its window, per rule (#47): halved by
	// RL.SCALE, the window its 30 s.
	if v := metricValue(t, httpAddr, `sluice_rule_limit{domain="m",rule="per-30s"}`); v != 5 {
		t.Fatalf("sluice_rule_limit %v, want 5", v)
	}
	if v := metricValue(t, httpAddr, `sluice_rule_window_seconds{domain="m",rule="per-30s"}`); v != 30 {
		t.Fatalf("sluice_rule_window_seconds %v, want 30", v)
	}
	if err := c.Do(ctx(t), "RL.SCALE", "SET", "m", "0.5").Err(); err != nil {
		t.Fatal(err)
	}
	if v := metricValue(t, httpAddr, `sluice_rule_limit{domain="m",rule="per-30s"}`); v != 2 {
		t.Fatalf("sluice_rule_limit under RL.SCALE 0.5: %v, want 2", v)
	}
}

// A request's own limit with unit_multiplier (Envoy's
// RateLimitOverride.unit_multiplier): 2 per 30 s, a fixed window of 30 s
// aligned as the rules' are; a multiplier of 0 is refused as Envoy's own
// validation refuses it.
func TestUnitMultiplierInARequestsOwnLimit(t *testing.T) {
	grpcAddr := freeAddr(t)
	s := StartServer(t, "--grpc-addr", grpcAddr, "--rules", writeRules(t, "m.yaml", "domain: m\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100}\n"))
	start := (time.Now().Add(time.Hour).UnixNano() / 30e9) * 30e9
	if err := s.Client().Do(ctx(t), "DEBUG", "CLOCK", "SET", start).Err(); err != nil {
		t.Fatal(err)
	}
	rc, _ := rlsClient(t, grpcAddr)
	ask := func(mult uint32) (*pb.RateLimitResponse, error) {
		req := rlsRequest("m", 1, "k=own")
		req.Descriptors[0].Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_SECOND,
			UnitMultiplier: wrapperspb.UInt32(mult)}
		return rc.ShouldRateLimit(ctx(t), req)
	}
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		resp, err := ask(30)
		if err != nil {
			t.Fatal(err)
		}
		st := resp.GetStatuses()[0]
		l := st.GetCurrentLimit()
		if st.GetCode() != want || l.GetRequestsPerUnit() != 2 || l.GetUnit() != pb.RateLimitResponse_RateLimit_SECOND || l.GetUnitMultiplier().GetValue() != 30 ||
			st.GetDurationUntilReset().AsDuration() != 30*time.Second {
			t.Fatalf("request %d: %v, want %v of 2 per 30 s resetting in 30 s", i, st, want)
		}
	}
	if err := s.Client().Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", int64(29*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	if resp, err := ask(30); err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("29 s later, in the same window: %v %v", resp, err)
	}
	if err := s.Client().Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", int64(time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	if resp, err := ask(30); err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OK {
		t.Fatalf("in the next window: %v %v", resp, err)
	}
	if _, err := ask(0); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("unit_multiplier 0: %v, want INVALID_ARGUMENT", err)
	}
}
