package tests

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// INFO commandstats reports real time per command, LATENCY HISTOGRAM the
// distribution in Redis 7's shape, and CONFIG RESETSTAT clears both.
func TestCommandLatency(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	for i := range 200 {
		if err := c.Do(ctx(t), "CL.THROTTLE", "lat:"+strconv.Itoa(i%7), 10, 100, 60).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.Do(ctx(t), "CL.THROTTLE", "lat:x", -1, 1, 1) // an error reply
	stat := infoField(t, c, "commandstats", "cmdstat_cl.throttle")
	fields := map[string]string{}
	for _, kv := range strings.Split(stat, ",") {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = v
	}
	usec, _ := strconv.ParseInt(fields["usec"], 10, 64)
	perCall, _ := strconv.ParseFloat(fields["usec_per_call"], 64)
	if fields["calls"] != "201" || usec <= 0 || perCall <= 0 || fields["failed_calls"] != "1" {
		t.Fatalf("cmdstat_cl.throttle:%s, want 201 calls, usec > 0, 1 failed", stat)
	}

	v, err := c.Do(ctx(t), "LATENCY", "HISTOGRAM", "cl.throttle", "nosuch").Result()
	if err != nil {
		t.Fatal(err)
	}
	// RESP2: the maps are flat arrays.
	top, ok := v.([]any)
	if !ok || len(top) != 2 || top[0] != "cl.throttle" {
		t.Fatalf("LATENCY HISTOGRAM: %#v", v)
	}
	h := top[1].([]any)
	if len(h) != 4 || h[0] != "calls" || h[1] != int64(201) || h[2] != "histogram_usec" {
		t.Fatalf("LATENCY HISTOGRAM entry: %#v", h)
	}
	buckets := h[3].([]any)
	if len(buckets) == 0 || len(buckets)%2 != 0 || buckets[len(buckets)-1] != int64(201) {
		t.Fatalf("histogram_usec %#v: pairs of bound and cumulative count, ending with every call", buckets)
	}
	for i := 2; i < len(buckets); i += 2 {
		if buckets[i].(int64) != 2*buckets[i-2].(int64) || buckets[i+1].(int64) < buckets[i-1].(int64) {
			t.Fatalf("histogram_usec %#v: bounds must double and counts never fall", buckets)
		}
	}
	// RESP3: maps.
	c3 := s.Client(func(o *redis.Options) { o.Protocol = 3 })
	m3, err := c3.Do(ctx(t), "LATENCY", "HISTOGRAM").Result()
	if mm, ok := m3.(map[any]any); err != nil || !ok || mm["cl.throttle"] == nil {
		t.Fatalf("RESP3 LATENCY HISTOGRAM: %v %#v", err, m3)
	}
	out := redisCLI(t, s.Addr, "LATENCY", "HISTOGRAM", "cl.throttle")
	if !strings.Contains(out, "cl.throttle\ncalls\n201\nhistogram_usec\n") {
		t.Fatalf("redis-cli LATENCY HISTOGRAM:\n%s", out)
	}
	if err := c.ConfigResetStat(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	if out := redisCLI(t, s.Addr, "LATENCY", "HISTOGRAM", "cl.throttle"); strings.TrimSpace(out) != "" {
		t.Fatalf("after RESETSTAT: %q", out)
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// The operator's series: latency histograms, decisions by command and by
// rule (shadow refusals too), persistence, runtime and process.
func TestMetricsSeries(t *testing.T) {
	metricsAddr := freeAddr(t)
	s := StartServer(t, "--metrics-addr", metricsAddr, "--rules", writeRules(t, "api.yaml", apiRules))
	c := s.Client()
	setClock(t, c, future)
	for range 3 {
		c.Do(ctx(t), "CL.THROTTLE", "m", 1, 1, 60)
		c.Do(ctx(t), "RL.CHECK", "api", "DESCRIPTOR", "endpoint", "/x", "DESCRIPTOR", "canary", "c")
	}
	if err := c.Save(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, metricsAddr)
	for _, want := range []string{
		`sluice_decisions_total{command="cl.throttle",outcome="allowed"} 2`,
		`sluice_decisions_total{command="cl.throttle",outcome="limited"} 1`,
		`sluice_command_duration_seconds_count{command="cl.throttle"} 3`,
		`sluice_command_duration_seconds_bucket{command="cl.throttle",le="+Inf"} 3`,
		`sluice_rule_decisions_total{domain="api",outcome="allowed",rule="per-endpoint"} 2`,
		`sluice_rule_decisions_total{domain="api",outcome="limited",rule="per-endpoint"} 1`,
		`sluice_rule_shadow_refusals_total{domain="api",rule="canary"} 2`,
		"sluice_quota_store_commits_total ",
		"sluice_snapshot_timestamp_seconds ",
		"sluice_quota_store_failed 0",
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, `"m"`) || strings.Contains(text, "/x") {
		t.Error("a rate-limit key or descriptor value appears in the metrics")
	}
}

// A replicated node reports Raft: its state, term, indexes, commit latency
// and batch sizes.
func TestMetricsRaft(t *testing.T) {
	addrs := make([]string, 3)
	for i := range addrs {
		addrs[i] = freeAddr(t)
	}
	cl := StartCluster(t, 3, func(i int, _ []string) []string { return []string{"--metrics-addr", addrs[i]} })
	leader := cl.Leader()
	c := leader.Client()
	for range 5 {
		if err := c.Do(ctx(t), "CL.THROTTLE", "r", 10, 10, 60).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var text string
	for i, s := range cl.Nodes {
		if s == leader {
			text = scrape(t, addrs[i])
		}
	}
	for _, want := range []string{
		`sluice_raft_state{state="Leader"} 1`,
		"sluice_raft_term ",
		"sluice_raft_commit_index ",
		"sluice_raft_applied_index ",
		"sluice_raft_leader_changes_total ",
		"sluice_raft_commit_duration_seconds_count ",
		"sluice_raft_batch_commands_count ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("leader /metrics lacks %q", want)
		}
	}
	if strings.Contains(text, "sluice_raft_commit_duration_seconds_count 0") {
		t.Error("no commit latency recorded on the leader")
	}
}
