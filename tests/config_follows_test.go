package tests

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/slot"
)

// Rules, an override and a scale loaded by a client reach a group added
// later (CLUSTER ADDGROUP, --cluster-join, no --rules) before it serves a
// slot: the migration to it gives it the cluster's configuration, and
// checks on counters in the slots it took decide by them.
func TestConfigurationReachesAGroupAddedLater(t *testing.T) {
	sc := StartShardedCluster(t, 1, [][]string{{"0-8191"}, {"8192-16383"}})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	eventually(t, "the rules loaded in every group", func() bool {
		return cc.Do(ctx(t), "RL.RULES", "LOAD", "x.yaml", crossRules).Err() == nil
	})
	// A user whose counter is in the slots that will move to group 3.
	d, err := policy.Parse("x.yaml", []byte(crossRules))
	if err != nil {
		t.Fatal(err)
	}
	vip := ""
	for i := 0; vip == ""; i++ {
		u := "vip" + strconv.Itoa(i)
		e := []policy.Entry{{Key: "user", Value: u}}
		if slot.Of(d.Match(e).AppendKey(nil, e)) < 8192 {
			vip = u
		}
	}
	// Applied everywhere once every group's leader is known (it says to
	// send it again until then).
	eventually(t, "the override in every group", func() bool {
		return cc.Do(ctx(t), "RL.OVERRIDE", "SET", "x", 7, "day", "BURST", 6, "DESCRIPTOR", "user", vip).Err() == nil
	})
	if v := checkInts(t, cc, "RL.CHECK", "x", "COST", 0, "DESCRIPTOR", "user", vip); v[1] != 7 {
		t.Fatalf("the override before the move: %v", v)
	}
	g3 := &Server{t: t, Addr: freeAddr(t), DataDir: t.TempDir()}
	raft := freeAddr(t)
	g3.Args = []string{"--data-dir", g3.DataDir, "--node-id", "g3n1", "--cluster-join", sc.Groups[1][0].Addr}
	eventually(t, "ADDGROUP in every group", func() bool {
		err := sc.Leader(t, 0).Client().Do(ctx(t), "CLUSTER", "ADDGROUP", "g3", "g3n1", g3.Addr, raft).Err()
		if err != nil && !strings.Contains(err.Error(), "no leader known") {
			t.Fatalf("ADDGROUP: %v", err)
		}
		return err == nil
	})
	g3.Start()
	t.Cleanup(g3.Kill)
	grown := &ShardedCluster{Groups: append(slices.Clone(sc.Groups), []*Server{g3})}
	l3 := grown.Leader(t, 2).Client()
	eventually(t, "group 3 fenced", func() bool {
		info, _ := l3.Info(ctx(t), "cluster").Result()
		return strings.Contains(info, "sluice_slots_epoch:")
	})
	if v, _ := l3.Do(ctx(t), "RL.RULES", "LIST", "x").Slice(); len(v) != 0 {
		t.Fatalf("group 3 has rules before any migration: %v", v)
	}
	node3, _ := l3.Do(ctx(t), "CLUSTER", "MYID").Text()
	// Until group 1 has heard of group 3's leader, it cannot read its
	// rules and says so.
	eventually(t, "MIGRATESLOTS to group 3", func() bool {
		err := sc.Leader(t, 0).Client().Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, 8191, "NODE", node3).Err()
		if err != nil && !strings.Contains(err.Error(), "no leader known") {
			t.Fatalf("MIGRATESLOTS to group 3: %v", err)
		}
		return err == nil
	})
	migrationEnded(t, func() *redis.Client { return sc.Leader(t, 0).Client() })
	if v, _ := l3.Do(ctx(t), "RL.RULES", "LIST", "x").Slice(); len(v) != 2 {
		t.Fatalf("group 3's rules after the migration: %v", v)
	}
	// Users whose counters group 3 now keeps decide by the rules and the
	// override.
	cc.ReloadState(ctx(t))
	checked := 0
	for i := 0; checked < 3 && i < 200; i++ {
		u := "late" + strconv.Itoa(i)
		v := checkInts(t, cc, "RL.CHECK", "x", "DESCRIPTOR", "user", u)
		if v[0] != 0 || v[1] != 10 {
			t.Fatalf("user %s: %v, want the rules' 10 a day", u, v)
		}
		if grown.slotGroup(t, "user", u) == 2 {
			checked++
		}
	}
	if checked < 3 {
		t.Fatal("no user's counter in group 3: the test checked nothing there")
	}
	if v := checkInts(t, cc, "RL.CHECK", "x", "DESCRIPTOR", "user", vip); v[1] != 7 || grown.slotGroup(t, "user", vip) != 2 {
		t.Fatalf("the override, in group 3: %v", v)
	}
}
