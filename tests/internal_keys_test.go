package tests

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// sluice's own records are not keys, on a sharded cluster's members: with
// rules, an override, reservations held across groups and counters, KEYS,
// SCAN, DBSIZE, INFO keyspace and CLUSTER COUNTKEYSINSLOT see the counters
// only; EXISTS, TYPE and DEL do not see the slots' or the rules' records
// (DEL removes nothing, and the group still owns its slots and decides by
// its rules); redis-cli --cluster check counts the counters.
func TestInternalRecordsAreNotKeys(t *testing.T) {
	sc := StartShardedCluster(t, 1, [][]string{{"0-8191"}, {"8192-16383"}}, "--rules", writeRules(t, "llm.yaml", shardedReserveRules))
	waitShardedRules(t, sc, "llm", 2)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	leader := func(g int) *redis.Client { return sc.Leader(t, g).Client() }
	// waitShardedRules' fence probes left counters: start from none.
	for g := range 2 {
		if err := leader(g).FlushAll(ctx(t)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if out := redisCLI(t, sc.Addrs()[0], "--cluster", "check", sc.Addrs()[0]); !strings.Contains(out, "0 keys in 2 masters") {
		t.Fatalf("redis-cli --cluster check on an empty cluster:\n%s", out)
	}
	if err := cc.Do(ctx(t), "RL.OVERRIDE", "SET", "llm", 50, "minute", "DESCRIPTOR", "user", "vip").Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		checkInts(t, cc, "RL.RESERVE", "llm", "k"+strconv.Itoa(i), 60, "COST", 2, "DESCRIPTOR", "tenant", "t"+strconv.Itoa(i), "DESCRIPTOR", "user", "vip")
	}
	counter := regexp.MustCompile(`^rl:\{[^}]+\}.*#(gcra|sliding|sliding-exact|fixed|quota)$`)
	total := 0
	for g := range 2 {
		c := leader(g)
		keys, err := c.Keys(ctx(t), "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if !counter.MatchString(k) {
				t.Fatalf("group %d lists %q, not a counter", g+1, k)
			}
		}
		scanned, _, err := c.Scan(ctx(t), 0, "*", 1<<20).Result()
		if err != nil || len(scanned) != len(keys) {
			t.Fatalf("group %d: SCAN %d keys (%v), KEYS %d", g+1, len(scanned), err, len(keys))
		}
		if n := c.DBSize(ctx(t)).Val(); n != int64(len(keys)) {
			t.Fatalf("group %d: DBSIZE %d, KEYS %d", g+1, n, len(keys))
		}
		info := c.Info(ctx(t), "keyspace").Val()
		if want := "db0:keys=" + strconv.Itoa(len(keys)) + ","; len(keys) > 0 && !strings.Contains(info, want) {
			t.Fatalf("group %d: INFO keyspace %q, want %s", g+1, info, want)
		}
		slot := int64(cc.ClusterKeySlot(ctx(t), "sluice:slots").Val())
		inSlot := 0
		for _, k := range keys {
			if int64(cc.ClusterKeySlot(ctx(t), k).Val()) == slot {
				inSlot++
			}
		}
		if n := c.ClusterCountKeysInSlot(ctx(t), int(slot)).Val(); n != int64(inSlot) {
			t.Fatalf("group %d: CLUSTER COUNTKEYSINSLOT %d = %d, want %d", g+1, slot, n, inSlot)
		}
		total += len(keys)
	}
	if total == 0 {
		t.Fatal("no counters: the test saw nothing")
	}
	for _, key := range []string{"sluice:slots", "sluice:rules"} {
		if n, err := cc.Exists(ctx(t), key).Result(); n != 0 || err != nil {
			t.Fatalf("EXISTS %s = %d, %v", key, n, err)
		}
		if typ, err := cc.Type(ctx(t), key).Result(); typ != "none" || err != nil {
			t.Fatalf("TYPE %s = %q, %v", key, typ, err)
		}
		if n, err := cc.Del(ctx(t), key).Result(); n != 0 || err != nil {
			t.Fatalf("DEL %s = %d, %v", key, n, err)
		}
	}
	// The groups still own their slots and decide by their rules.
	v := checkInts(t, cc, "RL.CHECK", "llm", "COST", 0, "DESCRIPTOR", "user", "vip")
	if v[1] != 50 || v[2] != 50-12 {
		t.Fatalf("the override after DEL of the records: %v", v)
	}
	if out := redisCLI(t, sc.Addrs()[0], "--cluster", "check", sc.Addrs()[0]); !strings.Contains(out, strconv.Itoa(total)+" keys in 2 masters") ||
		!strings.Contains(out, "[OK] All 16384 slots covered") {
		t.Fatalf("redis-cli --cluster check, %d counters:\n%s", total, out)
	}
	for i := range 6 {
		if rows := settle(t, cc, "RL.SETTLE", "llm", "k"+strconv.Itoa(i), 1); len(rows) != 2 {
			t.Fatalf("RL.SETTLE k%d after the DELs: %v", i, rows)
		}
	}
}
