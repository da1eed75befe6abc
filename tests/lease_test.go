package tests

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

const leaseRules = `domain: edge
descriptors:
  - key: route
    rate_limit: {name: per-route, unit: day, requests_per_unit: 100}
  - key: closed
    rate_limit: {name: closed, unit: second, requests_per_unit: 0}
`

// leaseOf is RL.LEASE's [granted, ttl_ms, refresh_ms].
func leaseOf(t *testing.T, c redis.UniversalClient, args ...any) [3]int64 {
	t.Helper()
	v, err := c.Do(ctx(t), append([]any{"RL.LEASE"}, args...)...).Slice()
	if err != nil || len(v) != 3 {
		t.Fatalf("RL.LEASE %v: %v %v", args, v, err)
	}
	return [3]int64{v[0].(int64), v[1].(int64), v[2].(int64)}
}

// Issue #45 (RL.LEASE over RESP) through go-redis on one node: holders
// share a bucket by what they ask, a repeat returns the grant held, a
// return gives back exactly what was unused, a bucket no rule limits is
// granted what was asked and a closed one nothing, bad input charges
// nothing; leases are internal keys.
func TestLeaseThroughGoRedis(t *testing.T) {
	s := StartServer(t, "--rules", writeRules(t, "edge.yaml", leaseRules))
	c := s.Client()
	remaining := func() int64 {
		return checkInts(t, c, "RL.CHECK", "edge", "COST", 0, "DESCRIPTOR", "route", "/api")[2]
	}
	if g := leaseOf(t, c, "edge", "gw-1", 30, "WANT", 40, "DESCRIPTOR", "route", "/api"); g != [3]int64{40, 30000, 24000} {
		t.Fatalf("a first grant: %v", g)
	}
	if g := leaseOf(t, c, "edge", "gw-1", 30, "WANT", 90, "DESCRIPTOR", "route", "/api"); g[0] != 40 || g[1] > 30000 || g[1] < 25000 {
		t.Fatalf("a repeat while held: %v", g)
	}
	// gw-2 asks 60 while gw-1 asks 90: 150 asked of 100, gw-2's share is 40.
	if g := leaseOf(t, c, "edge", "gw-2", 30, "WANT", 60, "DESCRIPTOR", "route", "/api"); g[0] != 40 {
		t.Fatalf("gw-2's share: %v", g)
	}
	if r := remaining(); r != 20 {
		t.Fatalf("after grants of 40 and 40, remaining %d", r)
	}
	rows := settle(t, c, "RL.LEASE", "RETURN", "edge", "gw-1", "UNUSED", 25, "DESCRIPTOR", "route", "/api")
	if len(rows) != 1 || rows[0] != (settleRow{"per-route", 40, 15, 25, 0}) {
		t.Fatalf("return: %+v", rows)
	}
	if r := remaining(); r != 45 {
		t.Fatalf("after returning 25, remaining %d", r)
	}
	if rows := settle(t, c, "RL.LEASE", "RETURN", "edge", "gw-1", "UNUSED", 0, "DESCRIPTOR", "route", "/api"); rows != nil {
		t.Fatalf("a second return: %+v", rows)
	}
	if g := leaseOf(t, c, "edge", "gw-1", 5, "WANT", 7, "DESCRIPTOR", "other", "x"); g != [3]int64{7, 5000, 4000} {
		t.Fatalf("a bucket no rule limits: %v", g)
	}
	if g := leaseOf(t, c, "edge", "gw-1", 5, "WANT", 7, "DESCRIPTOR", "closed", "x"); g[0] != 0 {
		t.Fatalf("a closed bucket: %v", g)
	}
	for _, bad := range [][]any{
		{"RL.LEASE", "edge", "gw-1", 0, "WANT", 5, "DESCRIPTOR", "route", "/api"},
		{"RL.LEASE", "edge", "gw-1", 30, "WANT", -5, "DESCRIPTOR", "route", "/api"},
		{"RL.LEASE", "edge", "gw-1", 30, "WANT", 5, "DESCRIPTOR", "route", "/api", "DESCRIPTOR", "route", "/b"},
		{"RL.LEASE", "RETURN", "edge", "gw-2", "UNUSED", 41, "DESCRIPTOR", "route", "/api"},
		{"RL.RESERVE", "edge", "\x00lease:x", 30, "DESCRIPTOR", "route", "/api"},
	} {
		if err := c.Do(ctx(t), bad...).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR ") {
			t.Errorf("%q: %v, want an ERR", bad, err)
		}
	}
	if r := remaining(); r != 45 {
		t.Fatalf("bad input charged: remaining %d", r)
	}
	if n, err := c.DBSize(ctx(t)).Result(); err != nil || n != 1 {
		t.Fatalf("DBSIZE %d %v: only the counter is a user's key", n, err)
	}
	// A restart keeps the leases and the asks (snapshot): gw-2's repeat
	// answers its grant, and a new holder's share counts gw-2's ask.
	s.Stop()
	s.Start()
	c = s.Client()
	if g := leaseOf(t, c, "edge", "gw-2", 30, "WANT", 60, "DESCRIPTOR", "route", "/api"); g[0] != 40 {
		t.Fatalf("gw-2's repeat after a restart: %v", g)
	}
	if r := remaining(); r != 45 {
		t.Fatalf("after a restart, remaining %d", r)
	}
	// gw-3 asks 100 beside gw-2's 60 (gw-1's 90 too, for two ttls): its
	// share of 100 is 100 × 100 / 250 = 40, all of which is left.
	if g := leaseOf(t, c, "edge", "gw-3", 30, "WANT", 100, "DESCRIPTOR", "route", "/api"); g[0] != 40 {
		t.Fatalf("gw-3 after a restart: %v", g)
	}
}

// withGrant is RL.LEASE … WITHGRANT's [granted, ttl_ms, refresh_ms, grant].
func withGrant(t *testing.T, c redis.UniversalClient, args ...any) [4]int64 {
	t.Helper()
	v, err := c.Do(ctx(t), append([]any{"RL.LEASE"}, args...)...).Slice()
	if err != nil || len(v) != 4 {
		t.Fatalf("RL.LEASE %v: %v %v", args, v, err)
	}
	return [4]int64{v[0].(int64), v[1].(int64), v[2].(int64), v[3].(int64)}
}

// On a 3-node group, a grant is in the log: the leader is killed, and the
// new one answers the holder's repeat with the grant it holds (nothing
// charged again, the same grant id) and takes its return exactly. A late
// copy of that return, after the holder's next grant, ends nothing
// (issue #58: it had refunded units the next grant was using).
func TestLeaseSurvivesFailover(t *testing.T) {
	cl := StartCluster(t, 3, nil, "--rules", writeRules(t, "edge.yaml", leaseRules))
	awaitApplyLevel(t, cl.Nodes...) // grant ids from level 1
	leader := cl.Leader()
	c := leader.Client()
	eventually(t, "the leader applied its rules", func() bool {
		v, err := c.Do(ctx(t), "RL.RULES", "LIST", "edge").Slice()
		return err == nil && len(v) == 2
	})
	first := withGrant(t, c, "edge", "gw-1", 600, "WANT", 30, "WITHGRANT", "DESCRIPTOR", "route", "/api")
	if first[0] != 30 || first[3] <= 0 {
		t.Fatalf("grant: %v", first)
	}
	leader.Kill()
	next := cl.Leader().Client()
	if g := withGrant(t, next, "edge", "gw-1", 600, "WANT", 30, "WITHGRANT", "DESCRIPTOR", "route", "/api"); g[0] != 30 || g[3] != first[3] {
		t.Fatalf("the repeat on the new leader: %v, want grant %d's 30", g, first[3])
	}
	if g := leaseOf(t, next, "edge", "gw-1", 600, "WANT", 30, "DESCRIPTOR", "route", "/api"); g[0] != 30 {
		t.Fatalf("the repeat without WITHGRANT: %v", g)
	}
	remaining := func() int64 {
		return checkInts(t, next, "RL.CHECK", "edge", "COST", 0, "DESCRIPTOR", "route", "/api")[2]
	}
	if r := remaining(); r != 70 {
		t.Fatalf("after failover, remaining %d, want 70", r)
	}
	ret := []any{"RL.LEASE", "RETURN", "edge", "gw-1", "UNUSED", 10, "GRANT", first[3], "DESCRIPTOR", "route", "/api"}
	rows := settle(t, next, ret...)
	if len(rows) != 1 || rows[0] != (settleRow{"per-route", 30, 20, 10, 0}) {
		t.Fatalf("return on the new leader: %+v", rows)
	}
	second := withGrant(t, next, "edge", "gw-1", 600, "WANT", 30, "WITHGRANT", "DESCRIPTOR", "route", "/api")
	if second[0] != 30 || second[3] <= first[3] {
		t.Fatalf("the next grant: %v after grant %d", second, first[3])
	}
	if rows := settle(t, next, ret...); rows != nil {
		t.Fatalf("a late copy of the first grant's return: %+v, want nothing", rows)
	}
	if r := remaining(); r != 50 {
		t.Fatalf("after the late return, remaining %d, want 50 (20 used, the next grant's 30 held)", r)
	}
}
