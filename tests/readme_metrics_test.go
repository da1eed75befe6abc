package tests

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/httplimit"
)

// readmeMetric is a Prometheus series name as the README writes one, in
// backquotes, with or without its labels.
var readmeMetric = regexp.MustCompile("`(sluice_[a-z0-9_]*[a-z0-9])(?:\\{[^}`]*\\})?`")

// readmeInfoFields are sluice_ names the README gives as INFO fields, not
// Prometheus series.
var readmeInfoFields = map[string]bool{"sluice_quota_status": true, "sluice_slots": true, "sluice_slots_epoch": true, "sluice_migrating": true,
	"sluice_apply_level": true, "sluice_apply_level_supported": true}

// hasSeries reports whether exposition text has a sample of name (a
// histogram's samples are name_bucket, name_sum and name_count).
func hasSeries(text, name string) bool {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		rest = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(rest, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ") {
			return true
		}
	}
	return false
}

// Every series the README names is exported after traffic: by a node, a
// cluster member (Raft, peers, the rate limit service forwarding to the
// leader) or an application running httplimit.
func TestEveryREADMEMetricExists(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range readmeMetric.FindAllStringSubmatch(string(readme), -1) {
		if !readmeInfoFields[m[1]] {
			names[m[1]] = true
		}
	}
	if len(names) < 40 {
		t.Fatalf("the README names only %d series: %v", len(names), names)
	}

	rules := writeRules(t, "api.yaml", apiRules)
	var pages []string

	// One node: decisions, rules (a shadow rule past its limit), quotas,
	// snapshots, the most-refused keys, an apply that panics.
	singleHTTP, singleGRPC := freeAddr(t), freeAddr(t)
	single := StartServer(t, "--http-addr", singleHTTP, "--grpc-addr", singleGRPC, "--rules", rules)
	sc := single.Client()
	for i := range 5 {
		sc.Do(ctx(t), "CL.THROTTLE", "hot", 1, 1, 60)
		sc.Do(ctx(t), "RL.CHECK", "api", "DESCRIPTOR", "canary", "c")
		sc.Do(ctx(t), "QUOTA.CHECK", fmt.Sprintf("q%d", i), 5, "DAY")
	}
	sc.Do(ctx(t), "DEBUG", "APPLY-PANIC", "boom")
	if err := sc.Do(ctx(t), "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	rc, _ := rlsClient(t, singleGRPC)
	for range 3 {
		if _, err := rc.ShouldRateLimit(ctx(t), rlsRequest("api", 1, "canary=r")); err != nil {
			t.Fatal(err)
		}
	}
	pages = append(pages, scrape(t, singleHTTP))

	// A cluster: a follower forwards the rate limit service's calls.
	httpAddrs, grpcAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}, []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cl := StartCluster(t, 3, func(i int, _ []string) []string {
		return []string{"--http-addr", httpAddrs[i], "--grpc-addr", grpcAddrs[i]}
	}, "--rules", rules)
	leader := cl.Leader()
	leader.Client().Do(ctx(t), "CL.THROTTLE", "c", 1, 1, 60)
	follower := indexOf(cl, cl.Followers(leader)[0])
	frc, _ := rlsClient(t, grpcAddrs[follower])
	eventually(t, "a follower forwarding a rate limit service call", func() bool {
		_, err := frc.ShouldRateLimit(ctx(t), rlsRequest("api", 1, "endpoint=/f"))
		return err == nil
	})
	for i := range 3 {
		pages = append(pages, scrape(t, httpAddrs[i]))
	}

	// A sharded cluster of two one-member groups: its members name the
	// groups, their slots and leaders.
	shardHTTP := []string{freeAddr(t), freeAddr(t)}
	StartShardedClusterWith(t, 1, [][]string{{"0-8191"}, {"8192-16383"}}, func(g, _ int) []string {
		return []string{"--http-addr", shardHTTP[g]}
	})
	eventually(t, "the sharded members fenced", func() bool {
		return strings.Contains(scrape(t, shardHTTP[0]), "sluice_cluster_fenced_epoch 1\n")
	})
	for _, a := range shardHTTP {
		pages = append(pages, scrape(t, a))
	}

	// An application whose httplimit has no sluice to ask.
	reg := prometheus.NewRegistry()
	mw, err := httplimit.New(httplimit.Config{
		Client: redis.NewClient(&redis.Options{Addr: freeAddr(t), MaxRetries: -1}), Key: keyByUser,
		Limit: httplimit.FixedWindow{Limit: 5, Window: time.Minute}, Metrics: reg, Timeout: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-User", "u")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	appHTTP := freeAddr(t)
	app := &http.Server{Addr: appHTTP, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go app.ListenAndServe()
	t.Cleanup(func() { app.Close() })
	eventually(t, "the application's /metrics", func() bool {
		r, err := http.Get("http://" + appHTTP + "/metrics")
		if err == nil {
			r.Body.Close()
		}
		return err == nil
	})
	pages = append(pages, scrape(t, appHTTP))

	for name := range names {
		found := false
		for _, p := range pages {
			if hasSeries(p, name) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("the README names %s; no node, cluster member or application exports it", name)
		}
	}
}
