package tests

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// With two of g1's three members dead (no quorum), the rest of the
// cluster is whole: a g2 member says cluster_state:ok, places all 16384
// slots in CLUSTER SLOTS (g1's on its last leader), counts g1's as failed;
// a go-redis ClusterClient and a redis-py RedisCluster created then serve
// g2's keys, and only commands for g1's slots fail (MOVED to its last leader, dead).
func TestAGroupDownLeavesTheOthersWhole(t *testing.T) {
	sc := StartShardedCluster(t, 3, [][]string{{"0-8191"}, {"8192-16383"}})
	sc.Leader(t, 0)
	sc.Leader(t, 1)
	sc.Groups[0][0].Kill()
	sc.Groups[0][1].Kill()
	g2 := sc.Groups[1][0].Client()
	eventually(t, "g2 sees g1 leaderless", func() bool {
		info, _ := g2.ClusterInfo(ctx(t)).Result()
		return strings.Contains(info, "cluster_state:ok\r\n") && strings.Contains(info, "cluster_slots_fail:8192\r\n")
	})
	slots, err := g2.ClusterSlots(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	placed := 0
	for _, s := range slots {
		placed += s.End - s.Start + 1
	}
	if placed != 16384 {
		t.Fatalf("CLUSTER SLOTS places %d slots: %v", placed, slots)
	}
	// The leaderless group's survivor places its slots on itself — a
	// member that is up — not on the first member of its list, which may
	// be dead (ioredis' first ready check went there, and its connect
	// never returned).
	survivor := sc.Groups[0][2]
	eventually(t, "g1's survivor standing for its group", func() bool {
		slots, err := survivor.Client().ClusterSlots(ctx(t)).Result()
		if err != nil {
			return false
		}
		for _, s := range slots {
			if s.Start == 0 && len(s.Nodes) > 0 && s.Nodes[0].Addr == survivor.Addr {
				return true
			}
		}
		return false
	})
	if v, err := g2.ConfigGet(ctx(t), "cluster-require-full-coverage").Result(); err != nil || v["cluster-require-full-coverage"] != "no" {
		t.Fatalf("CONFIG GET cluster-require-full-coverage: %v %v", v, err)
	}
	var mine, theirs string
	for i := 0; mine == "" || theirs == ""; i++ {
		k := "down" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if g2.ClusterKeySlot(ctx(t), k).Val() >= 8192 {
			mine = k
		} else {
			theirs = k
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{sc.Groups[1][1].Addr}, MaxRedirects: 4, MaxRetries: 1})
	t.Cleanup(func() { cc.Close() })
	if err := cc.Do(ctx(t), "CL.THROTTLE", mine, 5, 5, 60).Err(); err != nil {
		t.Fatalf("g2's key through a new ClusterClient: %v", err)
	}
	if err := cc.Do(ctx(t), "CL.THROTTLE", theirs, 5, 5, 60).Err(); err == nil {
		t.Fatal("g1's key was served while g1 has no leader")
	}
	if out, err := exec.Command(pythonWithRedisPy, "-c", "import redis.cluster").CombinedOutput(); err != nil {
		t.Fatalf("redis-py is not installed for %s (.ci/run installs python3-redis): %v\n%s", pythonWithRedisPy, err, out)
	}
	host, port, _ := strings.Cut(sc.Groups[1][2].Addr, ":")
	py := `import sys
from redis.cluster import RedisCluster
rc = RedisCluster(host=sys.argv[1], port=int(sys.argv[2]))
print(rc.execute_command("CL.THROTTLE", sys.argv[3], 5, 5, 60))`
	out, err := exec.Command(pythonWithRedisPy, "-c", py, host, port, mine).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "[0, 6, 4,") {
		t.Fatalf("a new RedisCluster with g1 down: %v\n%s", err, out)
	}
}
