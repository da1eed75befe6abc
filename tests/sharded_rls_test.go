package tests

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// Envoy's ShouldRateLimit across the groups of a sharded cluster: any
// node's gRPC door answers, whichever group owns the domain and the
// counters; a request whose counters sit in two groups is charged in both
// or neither (a refused one's units come back), also from 50 concurrent
// callers spread over every node; RL.SHOULDRATELIMIT over RESP and POST
// /json are the same decision.
func TestCrossGroupShouldRateLimit(t *testing.T) {
	var grpcAddrs, httpAddrs [2][3]string
	for g := range 2 {
		for j := range 3 {
			grpcAddrs[g][j], httpAddrs[g][j] = freeAddr(t), freeAddr(t)
		}
	}
	sc := StartShardedClusterWith(t, 3, [][]string{{"0-8191"}, {"8192-16383"}},
		func(g, j int) []string {
			return []string{"--grpc-addr", grpcAddrs[g][j], "--http-addr", httpAddrs[g][j]}
		}, "--rules", writeRules(t, "x.yaml", crossRules))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	eventually(t, "rules in both groups, both fenced", func() bool {
		for g := range 2 {
			if v, _ := sc.Leader(t, g).Client().Do(ctx(t), "RL.RULES", "LIST", "x").Slice(); len(v) != 2 {
				return false
			}
		}
		return cc.Do(ctx(t), "RL.CHECK", "x", "COST", 0, "DESCRIPTOR", "user", "warm").Err() == nil
	})
	var doors []pb.RateLimitServiceClient
	for g := range 2 {
		for j := range 3 {
			c, _ := rlsClient(t, grpcAddrs[g][j])
			doors = append(doors, c)
		}
	}
	userLeft := func(u string) int64 {
		return checkInts(t, cc, "RL.CHECK", "x", "COST", 0, "DESCRIPTOR", "user", u)[2]
	}
	// Every node's door, in turn: a user and the endpoint /e (3 a day).
	admitted := 0
	for i := range 12 {
		u := "u" + strconv.Itoa(i)
		r, err := doors[i%len(doors)].ShouldRateLimit(ctx(t), rlsRequest("x", 1, "user="+u, "endpoint=/e"))
		if err != nil {
			t.Fatalf("call %d through node %d: %v", i, i%len(doors), err)
		}
		if len(r.Statuses) != 2 || r.Statuses[0].CurrentLimit.GetName() != "per-user" || r.Statuses[1].CurrentLimit.GetName() != "per-endpoint" {
			t.Fatalf("call %d: %v", i, r)
		}
		want := int64(9)
		if r.OverallCode == codeOver {
			want = 10 // given back
			// As one group answers a refused request: the user's status
			// says what was there, nothing charged.
			if r.Statuses[0].Code != codeOK || r.Statuses[0].LimitRemaining != 10 || r.Statuses[1].Code != codeOver {
				t.Fatalf("refused call %d: %v", i, r)
			}
		} else {
			admitted++
			if r.Statuses[0].LimitRemaining != 9 || r.Statuses[1].LimitRemaining != uint32(3-admitted) {
				t.Fatalf("admitted call %d: %v", i, r)
			}
		}
		eventually(t, "user "+u+"'s counter settled", func() bool { return userLeft(u) == want })
	}
	if admitted != 3 {
		t.Fatalf("%d calls admitted on an endpoint limit of 3", admitted)
	}

	// RL.SHOULDRATELIMIT over RESP (a cluster client routes it by the
	// domain) and POST /json on a follower: the same decision.
	v, err := cc.Do(ctx(t), "RL.SHOULDRATELIMIT", "x", 1, 1, "-", "-", "-", "user", "resp", 1, "-", "-", "-", "endpoint", "/resp").Slice()
	if err != nil || v[0] != int64(1) || v[1].([]any)[4] != int64(9) || v[2].([]any)[4] != int64(2) {
		t.Fatalf("RL.SHOULDRATELIMIT: %v %v", v, err)
	}
	follower := sc.Groups[0][0]
	if follower == sc.Leader(t, 0) {
		follower = sc.Groups[0][1]
	}
	fj := -1
	for j, s := range sc.Groups[0] {
		if s == follower {
			fj = j
		}
	}
	body := `{"domain":"x","descriptors":[{"entries":[{"key":"user","value":"json"}]},{"entries":[{"key":"endpoint","value":"/resp"}]}]}`
	res, err := http.Post("http://"+httpAddrs[0][fj]+"/json", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var jr pb.RateLimitResponse
	if err := protojson.Unmarshal(raw, &jr); res.StatusCode != 200 || err != nil || jr.OverallCode != codeOK || jr.Statuses[1].LimitRemaining != 1 {
		t.Fatalf("POST /json on a follower: %d %s %v", res.StatusCode, raw, err)
	}

	// 50 callers over every node's door, a fresh endpoint: never more
	// than its limit admitted, and every refused caller's unit back.
	var ok atomic.Int64
	var refusedUsers sync.Map
	var wg sync.WaitGroup
	for w := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				u := fmt.Sprintf("w%d-%d", w, i)
				r, err := doors[(w+i)%len(doors)].ShouldRateLimit(context.Background(), rlsRequest("x", 1, "user="+u, "endpoint=/busy"))
				if err != nil {
					t.Errorf("caller %d: %v", w, err)
					return
				}
				if r.OverallCode == codeOK {
					ok.Add(1)
				} else {
					refusedUsers.Store(u, true)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() > 3 || ok.Load() == 0 {
		t.Fatalf("%d concurrent calls admitted on an endpoint limit of 3", ok.Load())
	}
	n := 0
	refusedUsers.Range(func(k, _ any) bool {
		if n++; n <= 20 {
			u := k.(string)
			eventually(t, "refused caller "+u+"'s unit given back", func() bool { return userLeft(u) == 10 })
		}
		return true
	})
}

// Rules must be the same in every group: a group loaded apart from the
// others refuses the parts of checks that span it, naming both digests,
// and RL.RULES LIST says the groups differ; loading through any node
// makes them equal again.
func TestCrossGroupRulesMustAgree(t *testing.T) {
	grpcAddr := freeAddr(t)
	sc := StartShardedClusterWith(t, 1, [][]string{{"0-8191"}, {"8192-16383"}},
		func(g, j int) []string {
			if g == 0 {
				return []string{"--grpc-addr", grpcAddr}
			}
			return nil
		}, "--rules", writeRules(t, "x.yaml", crossRules))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	eventually(t, "rules in both groups, both fenced", func() bool {
		for g := range 2 {
			if v, _ := sc.Groups[g][0].Client().Do(ctx(t), "RL.RULES", "LIST", "x").Slice(); len(v) != 2 {
				return false
			}
		}
		return cc.Do(ctx(t), "RL.CHECK", "x", "COST", 0, "DESCRIPTOR", "user", "warm").Err() == nil
	})
	if v, err := cc.Do(ctx(t), "RL.RULES", "LIST").Slice(); err != nil || len(v) != 2 {
		t.Fatalf("RL.RULES LIST with equal rules: %v %v", v, err)
	}
	// Group 2 alone gets a larger endpoint limit.
	other := strings.Replace(crossRules, "requests_per_unit: 3,", "requests_per_unit: 30,", 1)
	if _, err := sc.AsMember(t, 1, nil, asConfig("RL.RULES", "LOAD", "x.yaml", other)); err != nil {
		t.Fatal(err)
	}
	err := cc.Do(ctx(t), "RL.RULES", "LIST").Err()
	if err == nil || !strings.Contains(err.Error(), "RULESDIFFER") || !strings.Contains(err.Error(), "g1 ") || !strings.Contains(err.Error(), "g2 ") {
		t.Fatalf("RL.RULES LIST with differing rules: %v", err)
	}
	// A check spanning both groups: refused with an error naming both
	// digests; nothing charged in either.
	var users []string
	for i := 0; len(users) < 8; i++ {
		users = append(users, "v"+strconv.Itoa(i))
	}
	args := []any{"RL.CHECK", "x"}
	for _, u := range users {
		args = append(args, "DESCRIPTOR", "user", u)
	}
	err = cc.Do(ctx(t), args...).Err()
	if err == nil || !strings.Contains(err.Error(), "different rules") || strings.Count(err.Error(), "rules are ") != 1 {
		t.Fatalf("a check across groups with differing rules: %v", err)
	}
	_, err = func() (any, error) {
		c, _ := rlsClient(t, grpcAddr)
		descs := make([]string, len(users))
		for i, u := range users {
			descs[i] = "user=" + u
		}
		return c.ShouldRateLimit(ctx(t), rlsRequest("x", 1, descs...))
	}()
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "different rules") {
		t.Fatalf("ShouldRateLimit across groups with differing rules: %v", err)
	}
	// Load through any node: every group takes it; all agree again.
	if err := cc.Do(ctx(t), "RL.RULES", "LOAD", "x.yaml", crossRules).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := cc.Do(ctx(t), "RL.RULES", "LIST").Slice(); err != nil || len(v) != 2 {
		t.Fatalf("RL.RULES LIST after a load through one node: %v %v", v, err)
	}
	v := checkInts(t, cc, args...)
	if v[0] != 0 || v[2] != 9 {
		t.Fatalf("the check after the rules agree: %v (the refused one charged?)", v)
	}
}

const shardKeyRules = `domain: t
sluice: {shard_key: tenant}
descriptors:
  - key: tenant
    rate_limit: {unit: day, requests_per_unit: 5}
    descriptors:
      - key: path
        rate_limit: {unit: day, requests_per_unit: 2}
`

// A domain's shard_key puts every counter of one tenant in the tenant's
// slot: checks by tenant are one group's and one apply (no part is
// reserved anywhere), and the keys are where a cluster client sends the
// tenant's own keys.
func TestShardKeyKeepsChecksInOneGroup(t *testing.T) {
	metrics := []string{freeAddr(t), freeAddr(t)}
	sc := StartShardedClusterWith(t, 1, [][]string{{"0-8191"}, {"8192-16383"}},
		func(g, _ int) []string { return []string{"--metrics-addr", metrics[g]} },
		"--rules", writeRules(t, "t.yaml", shardKeyRules), "--rules", writeRules(t, "x.yaml", crossRules))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	eventually(t, "rules in both groups, both fenced", func() bool {
		for g := range 2 {
			if v, _ := sc.Groups[g][0].Client().Do(ctx(t), "RL.RULES", "LIST", "t").Slice(); len(v) != 2 {
				return false
			}
		}
		return cc.Do(ctx(t), "RL.CHECK", "x", "COST", 0, "DESCRIPTOR", "user", "warm").Err() == nil
	})
	// The parts the members' coordinators split checks into.
	reserved := func() (n float64) {
		for _, addr := range metrics {
			for _, line := range strings.Split(scrape(t, addr), "\n") {
				if v, ok := strings.CutPrefix(line, "sluice_crossgroup_parts_total "); ok {
					k, _ := strconv.ParseFloat(v, 64)
					n += k
				}
			}
		}
		return n
	}
	for i := range 16 {
		tenant := "tenant-" + strconv.Itoa(i)
		for j := range 3 {
			v := checkInts(t, cc, "RL.CHECK", "t", "DESCRIPTOR", "tenant", tenant, "DESCRIPTOR", "tenant", tenant, "path", "/a")
			if (j < 2) != (v[0] == 0) {
				t.Fatalf("%s check %d: %v", tenant, j, v)
			}
		}
		// Both counters, in the tenant's slot's group only.
		owner := 0
		if cc.ClusterKeySlot(ctx(t), tenant).Val() >= 8192 {
			owner = 1
		}
		for g := range 2 {
			keys, _ := sc.Groups[g][0].Client().Keys(ctx(t), "*tenant=*"+tenant+"*").Result()
			if want := map[bool]int{true: 2, false: 0}[g == owner]; len(keys) != want {
				t.Fatalf("%s: group %d holds %q", tenant, g+1, keys)
			}
		}
	}
	if n := reserved(); n != 0 {
		t.Fatalf("checks by tenant reserved %v parts", n)
	}
	// Without a shard key, the same kind of check by user spans groups.
	for i := range 8 {
		u := "user-" + strconv.Itoa(i)
		checkInts(t, cc, "RL.CHECK", "x", "DESCRIPTOR", "user", u, "DESCRIPTOR", "endpoint", "/"+u)
	}
	if reserved() == 0 {
		t.Fatal("checks across groups reserved no part: the count shows nothing")
	}
}

// Members of a sharded cluster serving TLS call each other over TLS: the
// leaders are learned (a cluster client is sent to the right group) and a
// check across groups is decided by both.
func TestShardedClusterOverTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	sc := startSharded(t, 1, 1, [][]string{{"0-8191"}, {"8192-16383"}}, nil, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--rules", writeRules(t, "x.yaml", crossRules))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8,
		TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	t.Cleanup(func() { cc.Close() })
	var users [2]string
	eventually(t, "both groups serving over TLS, each knowing the other's leader", func() bool {
		for i := range 40 {
			u := "tls" + strconv.Itoa(i)
			if err := cc.Do(ctx(t), "CL.THROTTLE", u, 10, 10, 60, 0).Err(); err != nil {
				return false
			}
			users[cc.ClusterKeySlot(ctx(t), u).Val()/8192] = u
		}
		return true
	})
	eventually(t, "rules in both groups", func() bool {
		for g := range 2 {
			if v, _ := sc.Leader(t, g).Client().Do(ctx(t), "RL.RULES", "LIST", "x").Slice(); len(v) != 2 {
				return false
			}
		}
		return true
	})
	// Enough users that their counters sit in both groups: one check,
	// charged in both.
	args := []any{"RL.CHECK", "x"}
	for i := range 8 {
		args = append(args, "DESCRIPTOR", "user", "tu"+strconv.Itoa(i))
	}
	if v := checkInts(t, cc, args...); v[0] != 0 || v[2] != 9 {
		t.Fatalf("a check across groups over TLS: %v", v)
	}
	if v := checkInts(t, cc, args...); v[0] != 0 || v[2] != 8 {
		t.Fatalf("the same check again: %v", v)
	}
}
