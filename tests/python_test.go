package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// pythonWithRedisPy is Debian's python3 with its python3-redis (redis-py),
// which .ci/run installs.
const pythonWithRedisPy = "/usr/bin/python3"

// redis-py, the most common Python client: its default pipeline
// (MULTI … EXEC), WATCH, and RedisCluster routing every command with keys.
func TestRedisPy(t *testing.T) {
	if out, err := exec.Command(pythonWithRedisPy, "-c", "import redis.cluster").CombinedOutput(); err != nil {
		t.Fatalf("redis-py is not installed for %s (.ci/run installs python3-redis): %v\n%s", pythonWithRedisPy, err, out)
	}
	single := StartServer(t)
	cl := StartCluster(t, 3, nil)
	leader := cl.Leader()
	_, sp, _ := strings.Cut(single.Addr, ":")
	_, cp, _ := strings.Cut(leader.Addr, ":")
	out, err := exec.Command(pythonWithRedisPy, "python/clients.py", sp, cp).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("redis-py: %v\n%s", err, out)
	}
}

// redis-py's RedisCluster against a sharded cluster of two groups: every
// limiter command routed to the group that owns its key, which alone
// holds it; checks across groups all or nothing.
func TestRedisPyShardedCluster(t *testing.T) {
	if out, err := exec.Command(pythonWithRedisPy, "-c", "import redis.cluster").CombinedOutput(); err != nil {
		t.Fatalf("redis-py is not installed for %s (.ci/run installs python3-redis): %v\n%s", pythonWithRedisPy, err, out)
	}
	sc := StartShardedCluster(t, 3, [][]string{{"0-8191"}, {"8192-16383"}}, "--rules", writeRules(t, "x.yaml", crossRules))
	waitShardedRules(t, sc, "x", 2)
	_, port, _ := strings.Cut(sc.Groups[1][2].Addr, ":")
	out, err := exec.Command(pythonWithRedisPy, "python/sharded.py", port).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("redis-py: %v\n%s", err, out)
	}
	keysOnlyInOwners(t, sc, string(out))
}
