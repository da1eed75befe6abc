package tests

import (
	"strings"
	"testing"
)

// GCRA limits, so no window boundary falls between the calls.
const leaderMetricsRules = `domain: api
descriptors:
  - key: endpoint
    rate_limit:
      name: per-endpoint
      unit: day
      requests_per_unit: 2
      sluice: {algorithm: gcra, burst: 1}
  - key: canary
    shadow_mode: true
    rate_limit:
      name: canary
      unit: day
      requests_per_unit: 1
      sluice: {algorithm: gcra, burst: 0}
`

// A replicated leader counts RL.CHECK's decisions by rule, shadow refusals
// included, as a single node does: the outcome of each command comes back
// from the log typed, not as a reply to read numbers out of.
func TestLeaderCountsDecisionsByRule(t *testing.T) {
	metrics := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cl := StartCluster(t, 3, func(i int, _ []string) []string {
		return []string{"--metrics-addr", metrics[i]}
	}, "--rules", writeRules(t, "api.yaml", leaderMetricsRules))
	leader := cl.Leader()
	c := leader.Client()
	eventually(t, "the leader applied its rules", func() bool {
		v, err := c.Do(ctx(t), "RL.RULES", "LIST", "api").Slice()
		return err == nil && len(v) == 2
	})
	for i := range 3 {
		// Pipelined in pairs and alone: both of a connection's paths
		// through the log.
		if i == 2 {
			if err := c.Do(ctx(t), "RL.CHECK", "api", "DESCRIPTOR", "endpoint", "/x", "DESCRIPTOR", "canary", "c").Err(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		p := c.Pipeline()
		p.Do(ctx(t), "PING")
		p.Do(ctx(t), "RL.CHECK", "api", "DESCRIPTOR", "endpoint", "/x", "DESCRIPTOR", "canary", "c")
		if _, err := p.Exec(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	text := scrape(t, metrics[indexOf(cl, leader)])
	for _, want := range []string{
		`sluice_decisions_total{command="rl.check",outcome="allowed"} 2`,
		`sluice_decisions_total{command="rl.check",outcome="limited"} 1`,
		`sluice_rule_decisions_total{domain="api",outcome="allowed",rule="per-endpoint"} 2`,
		`sluice_rule_decisions_total{domain="api",outcome="limited",rule="per-endpoint"} 1`,
		`sluice_rule_shadow_refusals_total{domain="api",rule="canary"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the leader's /metrics lacks %q", want)
		}
	}
	top, err := c.Do(ctx(t), "THROTTLED.TOP").Slice()
	if first, _ := firstOf(top).([]any); err != nil || len(top) != 1 || len(first) != 2 || first[0] != "api" || first[1] != int64(1) {
		t.Errorf("THROTTLED.TOP after a refusal on the leader: %v %v", top, err)
	}
}

func firstOf(v []any) any {
	if len(v) == 0 {
		return nil
	}
	return v[0]
}
