package tests

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/httplimit"
)

const shardedReserveRules = `domain: llm
descriptors:
  - key: tenant
    rate_limit:
      name: tokens-per-day
      unit: day
      requests_per_unit: 100000
      sluice: {algorithm: quota}
  - key: user
    rate_limit: {name: per-user, unit: hour, requests_per_unit: 30}
`

// Reservations on a sharded cluster, through a go-redis ClusterClient:
// RL.RESERVE of 40 tenants on two groups is admitted wherever a tenant's
// counter hashes (a reserve whose counters sit in another group than its
// domain's is held as parts there); retried, it charges nothing again;
// RL.SETTLE and RL.CANCEL give back and charge exactly, the rows in the
// reserve's order; a reserve one part refuses charges nothing anywhere;
// and after every slot of the first group moved to the second, the
// reservations held before settle as exactly (their parts moved with
// their slots).
func TestReservationsAcrossGroups(t *testing.T) {
	sc := StartShardedCluster(t, 1, [][]string{{"0-8191"}, {"8192-16383"}}, "--rules", writeRules(t, "llm.yaml", shardedReserveRules))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	waitShardedRules(t, sc, "llm", 2)
	left := func(desc ...any) int64 {
		t.Helper()
		return checkInts(t, cc, append([]any{"RL.CHECK", "llm", "COST", 0, "DESCRIPTOR"}, desc...)...)[2]
	}
	// 40 tenants: about half of them hash to the group that does not keep
	// the domain's records.
	const tenants = 40
	for i := range tenants {
		tenant := "t" + strconv.Itoa(i)
		v := checkInts(t, cc, "RL.RESERVE", "llm", "res"+strconv.Itoa(i), 60, "COST", 10, "DESCRIPTOR", "tenant", tenant)
		if v[0] != 0 || v[1] != 100000 || v[2] != 99990 {
			t.Fatalf("RL.RESERVE for %s: %v", tenant, v)
		}
		// Retried (its reply lost): the same answer, nothing charged.
		if again := checkInts(t, cc, "RL.RESERVE", "llm", "res"+strconv.Itoa(i), 60, "COST", 10, "DESCRIPTOR", "tenant", tenant); fmt.Sprint(again) != fmt.Sprint(v) {
			t.Fatalf("a retried RL.RESERVE for %s: %v, first %v", tenant, again, v)
		}
		if got := left("tenant", tenant); got != 99990 {
			t.Fatalf("tenant %s: %d left after a reserve of 10 and its retry", tenant, got)
		}
	}
	// The same id with other arguments is refused, whichever group keeps
	// the tenant's counter.
	for i := range 4 {
		err := cc.Do(ctx(t), "RL.RESERVE", "llm", "res"+strconv.Itoa(i), 60, "COST", 11, "DESCRIPTOR", "tenant", "t"+strconv.Itoa(i)).Err()
		if err == nil || err.Error() != "ERR reservation res"+strconv.Itoa(i)+" is held with other arguments" {
			t.Fatalf("res%d reused with other arguments: %v", i, err)
		}
	}
	// Half are settled now, below the reserve; the rest after the move.
	for i := range tenants / 2 {
		rows := settle(t, cc, "RL.SETTLE", "llm", "res"+strconv.Itoa(i), 4)
		if fmt.Sprint(rows) != "[{tokens-per-day 10 4 6 0}]" {
			t.Fatalf("RL.SETTLE res%d: %v", i, rows)
		}
		if got := left("tenant", "t"+strconv.Itoa(i)); got != 99996 {
			t.Fatalf("tenant t%d: %d left after settling at 4", i, got)
		}
		if rows := settle(t, cc, "RL.SETTLE", "llm", "res"+strconv.Itoa(i), 4); rows != nil {
			t.Fatalf("a second RL.SETTLE res%d: %v, want nil", i, rows)
		}
	}
	// Two counters in (most likely) two groups: rows in the reserve's
	// order; above the reserve the difference is charged; a cancel gives
	// everything back.
	spread := 0
	for i := range 8 {
		id, tenant, user := "two"+strconv.Itoa(i), "a"+strconv.Itoa(i), "u"+strconv.Itoa(i)
		checkInts(t, cc, "RL.RESERVE", "llm", id, 60, "COST", 5, "DESCRIPTOR", "tenant", tenant, "DESCRIPTOR", "user", user)
		var rows []settleRow
		if i%2 == 0 {
			rows = settle(t, cc, "RL.SETTLE", "llm", id, 7)
		} else {
			rows = settle(t, cc, "RL.CANCEL", "llm", id)
		}
		want := "[{tokens-per-day 5 7 0 2} {per-user 5 7 0 2}]"
		tenantLeft, userLeft := int64(100000-7), int64(30-7)
		if i%2 == 1 {
			want = "[{tokens-per-day 5 0 5 0} {per-user 5 0 5 0}]"
			tenantLeft, userLeft = 100000, 30
		}
		if fmt.Sprint(rows) != want {
			t.Fatalf("settle of %s: %v, want %s", id, rows, want)
		}
		if a, u := left("tenant", tenant), left("user", user); a != tenantLeft || u != userLeft {
			t.Fatalf("%s: tenant %d, user %d left; want %d, %d", id, a, u, tenantLeft, userLeft)
		}
		if sc.slotGroup(t, "tenant", tenant) != sc.slotGroup(t, "user", user) {
			spread++
		}
	}
	if spread == 0 {
		t.Fatal("no reservation had its counters in two groups: the test tried nothing across groups")
	}
	// A reserve one part refuses (the user's 30 an hour) is refused, and
	// charges the tenant's part nothing.
	checkInts(t, cc, "RL.CHECK", "llm", "COST", 30, "DESCRIPTOR", "user", "busy")
	for i := range 4 {
		tenant := "r" + strconv.Itoa(i)
		v := checkInts(t, cc, "RL.RESERVE", "llm", "refused"+strconv.Itoa(i), 60, "COST", 3, "DESCRIPTOR", "tenant", tenant, "DESCRIPTOR", "user", "busy")
		if v[0] != 1 {
			t.Fatalf("a reserve over the user's limit: %v", v)
		}
		// The tenant's part, admitted in its group, is cancelled off the
		// reply path, as a refused check's parts are.
		eventually(t, "tenant "+tenant+"'s part given back", func() bool { return left("tenant", tenant) == 100000 })
		if rows := settle(t, cc, "RL.SETTLE", "llm", "refused"+strconv.Itoa(i), 1); rows != nil {
			t.Fatalf("a refused reserve held something: %v", rows)
		}
	}

	// Every slot of g1 moves to g2: the reservations held move with them.
	nodeID, err := sc.Groups[1][0].Client().Do(ctx(t), "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Leader(t, 0).Client().Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, 8191, "NODE", nodeID).Err(); err != nil {
		t.Fatalf("MIGRATESLOTS: %v", err)
	}
	migrationEnded(t, func() *redis.Client { return sc.Leader(t, 0).Client() })
	for i := tenants / 2; i < tenants; i++ {
		tenant := "t" + strconv.Itoa(i)
		var rows []settleRow
		eventually(t, "RL.SETTLE after the move", func() bool {
			v, err := cc.Do(ctx(t), "RL.SETTLE", "llm", "res"+strconv.Itoa(i), 12).Result()
			if err != nil {
				if strings.HasPrefix(err.Error(), "TRYAGAIN") {
					return false
				}
				t.Fatalf("RL.SETTLE res%d after the move: %v", i, err)
			}
			for _, r := range v.([]any) {
				f := r.([]any)
				rows = append(rows, settleRow{f[0].(string), f[1].(int64), f[2].(int64), f[3].(int64), f[4].(int64)})
			}
			return true
		})
		if fmt.Sprint(rows) != "[{tokens-per-day 10 12 0 2}]" {
			t.Fatalf("RL.SETTLE res%d after the move: %v", i, rows)
		}
		if got := left("tenant", tenant); got != 100000-12 {
			t.Fatalf("tenant %s: %d left after settling at 12 after the move", tenant, got)
		}
	}
}

// slotGroup is the group (its index) whose leader keeps the counter of
// descriptor k=v of llm (counter keys name their descriptor,
// length-prefixed).
func (sc *ShardedCluster) slotGroup(t *testing.T, k, v string) int {
	t.Helper()
	part := fmt.Sprintf("%d:%s=%d:%s", len(k), k, len(v), v)
	for g := range sc.Groups {
		keys, err := sc.Leader(t, g).Client().Keys(ctx(t), "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range keys {
			if strings.Contains(key, part+"#") || strings.Contains(key, part+"/") {
				return g
			}
		}
	}
	t.Fatalf("no group keeps a counter for %s=%s", k, v)
	return -1
}

// httplimit.Reserve over a go-redis ClusterClient on two groups: every
// tenant's estimate is reserved wherever its counter hashes and settled
// with what the handler reported; a reserve the server refuses (more
// descriptors than RL.RESERVE takes) is never silent — counted as a
// failure with its reason, seen by OnError, and the failure mode applies
// (here closed: 503).
func TestHTTPLimitReserveOnAShardedCluster(t *testing.T) {
	sc := StartShardedCluster(t, 1, [][]string{{"0-8191"}, {"8192-16383"}}, "--rules", writeRules(t, "llm.yaml", shardedReserveRules))
	waitShardedRules(t, sc, "llm", 2)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	reg := prometheus.NewRegistry()
	var seen atomic.Int64
	mw, err := httplimit.New(httplimit.Config{
		Client:    cc,
		Key:       func(r *http.Request) string { return r.Header.Get("X-Tenant") },
		Timeout:   2 * time.Second,
		OnFailure: httplimit.FailClosed,
		Metrics:   reg,
		OnError:   func(*http.Request, error) { seen.Add(1) },
		Limit: httplimit.Reserve{
			Domain: "llm",
			Descriptors: func(r *http.Request, tenant string) [][]httplimit.Entry {
				d := [][]httplimit.Entry{{{Key: "tenant", Value: tenant}}}
				for r.Header.Get("X-Many") != "" && len(d) <= 64 {
					d = append(d, d[0])
				}
				return d
			},
			Estimate: func(r *http.Request) int64 {
				n, _ := strconv.ParseInt(r.Header.Get("X-Max-Tokens"), 10, 64)
				return n
			},
			TTL: time.Minute,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("used"), 10, 64)
		httplimit.ReportCost(r.Context(), n)
		w.Write([]byte("ok"))
	})))
	defer srv.Close()
	get := func(tenant, used, maxTokens string, many bool) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, srv.URL+"/?used="+used, nil)
		req.Header.Set("X-Tenant", tenant)
		req.Header.Set("X-Max-Tokens", maxTokens)
		if many {
			req.Header.Set("X-Many", "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	groups := map[int]bool{}
	for i := range 12 {
		tenant := "h" + strconv.Itoa(i)
		resp := get(tenant, "40", "100", false)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Limit") != "100000" {
			t.Fatalf("tenant %s: HTTP %d, X-RateLimit-Limit %q", tenant, resp.StatusCode, resp.Header.Get("X-RateLimit-Limit"))
		}
		eventually(t, "tenant "+tenant+" settled at 40", func() bool {
			return checkInts(t, cc, "RL.CHECK", "llm", "COST", 0, "DESCRIPTOR", "tenant", tenant)[2] == 100000-40
		})
		groups[sc.slotGroup(t, "tenant", tenant)] = true
	}
	if len(groups) != 2 {
		t.Fatalf("the tenants' counters sit in %d group(s): the test tried nothing across groups", len(groups))
	}
	if resp := get("h0", "1", "5", true); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a reserve the server refused: HTTP %d, want the failure mode's 503", resp.StatusCode)
	}
	if seen.Load() != 1 {
		t.Fatalf("OnError saw %d failures, want 1", seen.Load())
	}
	families, _ := reg.Gather()
	failures := 0.0
	for _, f := range families {
		if f.GetName() != "sluice_httplimit_failures_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == "error_reply" {
					failures += m.GetCounter().GetValue()
				}
			}
		}
	}
	if failures != 1 {
		t.Fatalf("sluice_httplimit_failures_total{reason=\"error_reply\"} = %v, want 1", failures)
	}
}

// Envoy's is_negative_hits on a sharded cluster's gRPC door: units given
// back to counters in both groups, in one request, answered OK; the
// counters read what the refunds left.
func TestNegativeHitsAcrossGroups(t *testing.T) {
	grpcAddrs := []string{freeAddr(t), freeAddr(t)}
	sc := StartShardedClusterWith(t, 1, [][]string{{"0-8191"}, {"8192-16383"}},
		func(g, _ int) []string { return []string{"--grpc-addr", grpcAddrs[g]} }, "--rules", writeRules(t, "x.yaml", crossRules))
	waitShardedRules(t, sc, "x", 2)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	c, _ := rlsClient(t, grpcAddrs[0])
	userLeft := func(u string) int64 {
		return checkInts(t, cc, "RL.CHECK", "x", "COST", 0, "DESCRIPTOR", "user", u)[2]
	}
	// Users whose counters sit in each group.
	var users []string
	groups := map[int]bool{}
	for i := 0; len(groups) < 2 || len(users) < 4; i++ {
		u := "n" + strconv.Itoa(i)
		if _, err := c.ShouldRateLimit(ctx(t), rlsRequest("x", 6, "user="+u)); err != nil {
			t.Fatal(err)
		}
		groups[sc.slotGroup(t, "user", u)] = true
		users = append(users, u)
	}
	back := rlsRequest("x", 4)
	for _, u := range users {
		back.Descriptors = append(back.Descriptors, rlsRequest("x", 0, "user="+u).Descriptors[0])
		back.Descriptors[len(back.Descriptors)-1].IsNegativeHits = true
	}
	resp, err := c.ShouldRateLimit(ctx(t), back)
	if err != nil || resp.OverallCode != codeOK {
		t.Fatalf("is_negative_hits across groups: %v %v", resp, err)
	}
	for i, u := range users {
		if st := resp.Statuses[i]; st.Code != codeOK || st.LimitRemaining != 8 {
			t.Fatalf("user %s's status: %v", u, st)
		}
		if left := userLeft(u); left != 8 {
			t.Fatalf("user %s: %d left after 6 charged and 4 given back", u, left)
		}
	}
}
