package tests

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Issue #45 on a 2×3 sharded cluster: RL.LEASE and its return through a
// go-redis ClusterClient for 20 routes whose counters hash to both groups
// (the counter's group decides; a member of the other answers MOVED to
// the counter's slot); an RLQS stream to every member, each bucket's
// lease charged in its counter's group.
func TestLeasesOnAShardedCluster(t *testing.T) {
	grpcAddrs := map[[2]int]string{}
	for g := range 2 {
		for j := range 3 {
			grpcAddrs[[2]int{g, j}] = freeAddr(t)
		}
	}
	sc := StartShardedClusterWith(t, 3, [][]string{{"0-8191"}, {"8192-16383"}}, func(g, j int) []string {
		return []string{"--grpc-addr", grpcAddrs[[2]int{g, j}]}
	}, "--rules", writeRules(t, "edge.yaml", `domain: edge
descriptors:
  - key: route
    rate_limit: {name: per-route, unit: year, requests_per_unit: 100}
`))
	// A year's window: the counts below are read across a grant and its
	// return, which a minute's window rolled over between once in CI (100
	// left where 90 were).
	waitShardedRules(t, sc, "edge", 1)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	left := func(route string) int64 {
		return checkInts(t, cc, "RL.CHECK", "edge", "COST", 0, "DESCRIPTOR", "route", route)[2]
	}
	for i := range 20 {
		route := "/r" + strconv.Itoa(i)
		if g := leaseOf(t, cc, "edge", "gw-1", 60, "WANT", 30, "DESCRIPTOR", "route", route); g[0] != 30 {
			t.Fatalf("%s: %v", route, g)
		}
		if g := leaseOf(t, cc, "edge", "gw-1", 60, "WANT", 30, "DESCRIPTOR", "route", route); g[0] != 30 {
			t.Fatalf("%s, again: %v", route, g)
		}
		if l := left(route); l != 70 {
			t.Fatalf("%s: %d left after a grant of 30", route, l)
		}
		rows := settle(t, cc, "RL.LEASE", "RETURN", "edge", "gw-1", "UNUSED", 20, "DESCRIPTOR", "route", route)
		if len(rows) != 1 || rows[0] != (settleRow{"per-route", 30, 10, 20, 0}) {
			t.Fatalf("%s: return %+v", route, rows)
		}
		if l := left(route); l != 90 {
			t.Fatalf("%s: %d left after 20 came back", route, l)
		}
	}
	for _, g := range sc.Groups {
		awaitApplyLevel(t, g...) // RL.SHARE from level 1
	}
	// RLQS on every member: bucket /q<g><j> is shared, and what its data
	// plane admitted charged, in its counter's group, wherever the stream
	// is. (100 a year is one every 3.65 days, one at once.)
	for g := range 2 {
		for j := range 3 {
			conn := rlqsConn(t, grpcAddrs[[2]int{g, j}])
			route := "/q" + strconv.Itoa(g) + strconv.Itoa(j)
			h := newRLQSHolder(t, conn, context.Background(), "edge", map[string]string{"route": route})
			for range 25 {
				h.Request(0)
			}
			eventually(t, "an assignment through member "+strconv.Itoa(g)+"/"+strconv.Itoa(j), func() bool {
				if err := h.report(0, time.Second); err != nil {
					t.Fatal(err)
				}
				return h.Last != nil
			})
			if got := h.Describe(); got != "token_bucket(1) ttl 2s" {
				t.Fatalf("%s: %s", route, got)
			}
			if !h.Request(0) {
				t.Fatalf("%s: its one token refused", route)
			}
			if err := h.report(0, time.Second); err != nil {
				t.Fatal(err)
			}
			if l := left(route); l != 99 {
				t.Fatalf("%s: %d left after one admitted", route, l)
			}
		}
	}
}
