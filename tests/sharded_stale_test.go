package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A member started with an older map (epoch 1, its group owning slots the
// current map, epoch 2, gives the other group) never makes two groups
// decide for one slot: even leading its group, its commands for those
// slots are refused by the group's state machine, fenced at epoch 2; the
// slot's counts are the other group's alone, exact; no key of it ever
// exists in the stale member's group.
func TestStaleMapNeverDecidesAnotherGroupsSlot(t *testing.T) {
	sc := startSharded(t, 2, 3, [][]string{{"0-8191"}, {"8192-16383"}}, nil, nil)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	// A key in 8192-12000: group 2's now, group 1's in the stale map.
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("contested%d", i)
		if s := cc.ClusterKeySlot(ctx(t), k).Val(); s >= 8192 && s <= 12000 {
			key = k
		}
	}
	eventually(t, "both groups fenced", func() bool {
		return cc.Do(ctx(t), "CL.THROTTLE", key, 100, 100, 3600, 0).Err() == nil
	})
	cur, err := os.ReadFile(sc.MapPath)
	if err != nil {
		t.Fatal(err)
	}
	stale := strings.Replace(string(cur), "epoch: 2", "epoch: 1", 1)
	stale = strings.Replace(stale, `slots: ["0-8191"]`, `slots: ["0-12000"]`, 1)
	stale = strings.Replace(stale, `slots: ["8192-16383"]`, `slots: ["12001-16383"]`, 1)
	stalePath := filepath.Join(t.TempDir(), "stale.yaml")
	if err := os.WriteFile(stalePath, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	// Restart a follower of group 1 on the stale map, then make it lead.
	leader := sc.Leader(t, 0)
	var old *Server
	oldID := ""
	for j, s := range sc.Groups[0] {
		if s != leader {
			old, oldID = s, fmt.Sprintf("g1n%d", j+1)
			break
		}
	}
	old.Stop()
	for i, a := range old.Args {
		if a == sc.MapPath {
			old.Args[i] = stalePath
		}
	}
	old.Start()
	eventually(t, "the stale member caught up and leads group 1", func() bool {
		leader.Client().Do(ctx(t), "RAFT", "TRANSFER", oldID)
		return role(t, old) == "master"
	})
	// Through the stale leader, which believes its group owns the key: a
	// write for it is refused, every time, as are checks through its
	// followers.
	direct := old.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	for i := range 20 {
		v, err := direct.Do(ctx(t), "CL.THROTTLE", key, 100, 100, 3600, 1).Result()
		if err == nil {
			t.Fatalf("call %d: the stale leader decided %s's slot: %v", i, key, v)
		}
		if i == 0 {
			t.Logf("the stale leader answers: %v", err)
		}
	}
	// Group 2 still decides it, alone and exactly: 1 (the warm-up, cost 0
	// charges nothing) + 10 units.
	g2 := sc.Leader(t, 1).Client()
	for range 10 {
		if err := g2.Do(ctx(t), "CL.THROTTLE", key, 100, 100, 3600, 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	v, err := g2.Do(ctx(t), "CL.THROTTLE", key, 100, 100, 3600, 0).Slice()
	if err != nil || len(v) != 5 || v[2] != int64(101-10) {
		t.Fatalf("group 2's count of %s: %v %v (want 91 remaining)", key, v, err)
	}
	for _, s := range sc.Groups[0] {
		if keys, err := s.Client().Keys(ctx(t), key).Result(); err != nil || len(keys) != 0 {
			t.Fatalf("%s exists in group 1 (%v, %v)", key, keys, err)
		}
	}
	eventually(t, "the stale member saying its map is older than its group's", func() bool {
		return strings.Contains(old.Logs(), "older than its group's")
	})
}
