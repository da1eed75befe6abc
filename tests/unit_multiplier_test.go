package tests

import (
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
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
