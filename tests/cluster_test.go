package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// go-redis' ClusterClient learns the topology from CLUSTER SLOTS and key
// positions from COMMAND, then routes CL.THROTTLE on keys of different
// slots to the one node that owns them all.
func TestGoRedisClusterClient(t *testing.T) {
	s := StartServer(t)
	setClock(t, s.Client(), future)
	for _, proto := range []int{2, 3} {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.Addr}, Protocol: proto})
		t.Cleanup(func() { cc.Close() })
		slots, err := cc.ClusterSlots(ctx(t)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(slots) != 1 || slots[0].Start != 0 || slots[0].End != 16383 || len(slots[0].Nodes) != 1 ||
			slots[0].Nodes[0].Addr != s.Addr || len(slots[0].Nodes[0].ID) != 40 {
			t.Fatalf("RESP%d CLUSTER SLOTS = %+v", proto, slots)
		}
		keys := []string{"user:1", "user:2", "user:3", "{acct}:a", "{acct}:b"}
		seenSlots := map[int64]bool{}
		for _, k := range keys {
			key := fmt.Sprintf("p%d:%s", proto, k)
			seenSlots[cc.ClusterKeySlot(ctx(t), key).Val()] = true
			got := ints(t, cc.Do(ctx(t), "CL.THROTTLE", key, 15, 30, 60))
			if fmt.Sprint(got) != "[0 16 15 -1 2]" {
				t.Fatalf("RESP%d CL.THROTTLE %s via ClusterClient = %v", proto, key, got)
			}
		}
		if len(seenSlots) < 3 {
			t.Fatalf("keys should span slots: %v", seenSlots)
		}
		// A pipeline across slots: ClusterClient splits it by node, here one.
		pipe := cc.Pipeline()
		var cmds []*redis.Cmd
		for _, k := range keys {
			cmds = append(cmds, pipe.Do(ctx(t), "CL.THROTTLE", fmt.Sprintf("p%d:%s", proto, k), 15, 30, 60))
		}
		if _, err := pipe.Exec(ctx(t)); err != nil {
			t.Fatal(err)
		}
		for i, c := range cmds {
			if got := ints(t, c); got[2] != 14 {
				t.Fatalf("RESP%d pipelined CL.THROTTLE %s = %v", proto, keys[i], got)
			}
		}
		masters := 0
		if err := cc.ForEachMaster(ctx(t), func(ctx2 context.Context, c *redis.Client) error {
			masters++
			return c.Ping(ctx2).Err()
		}); err != nil || masters != 1 {
			t.Fatalf("ForEachMaster: %d masters, %v", masters, err)
		}
		if n, err := cc.DBSize(ctx(t)).Result(); err != nil || n != int64(len(keys))*int64(proto-1) {
			t.Fatalf("RESP%d DBSIZE through the cluster = %d, %v", proto, n, err)
		}
	}
}

func TestRedisCLICluster(t *testing.T) {
	s := StartServer(t)
	for _, key := range []string{"foo", "bar", "{x}1", "{x}2"} {
		if out := redisCLI(t, s.Addr, "-c", "CL.THROTTLE", key, "15", "30", "60"); !strings.HasPrefix(out, "0\n16\n15\n") {
			t.Fatalf("redis-cli -c CL.THROTTLE %s printed %q", key, out)
		}
	}
	out := redisCLI(t, s.Addr, "--cluster", "check", s.Addr)
	for _, want := range []string{"[OK] All nodes agree about slots configuration.", "[OK] All 16384 slots covered."} {
		if !strings.Contains(out, want) {
			t.Fatalf("redis-cli --cluster check lacks %q:\n%s", want, out)
		}
	}
	if out := redisCLI(t, s.Addr, "CLUSTER", "INFO"); !strings.HasPrefix(out, "cluster_state:ok\r\n") &&
		!strings.HasPrefix(out, "cluster_state:ok\n") {
		t.Fatalf("CLUSTER INFO printed %q", out)
	}
	if out := redisCLI(t, s.Addr, "CLUSTER", "COUNTKEYSINSLOT", "6023"); out != "0\n" {
		t.Fatalf("COUNTKEYSINSLOT printed %q", out)
	}
}

func TestClusterMyIDSurvivesRestart(t *testing.T) {
	s := StartServer(t)
	id := s.Client().ClusterMyID(ctx(t)).Val()
	if len(id) != 40 {
		t.Fatalf("CLUSTER MYID = %q", id)
	}
	nodes := s.Client().ClusterNodes(ctx(t)).Val()
	if want := id + " " + s.Addr + "@"; !strings.HasPrefix(nodes, want) || !strings.Contains(nodes, " myself,master - 0 0 1 connected 0-16383") {
		t.Fatalf("CLUSTER NODES = %q", nodes)
	}
	s.Stop()
	s.Start()
	if again := s.Client().ClusterMyID(ctx(t)).Val(); again != id {
		t.Fatalf("node id %q after a restart, was %q", again, id)
	}
	s.Kill()
	s.Start()
	if again := s.Client().ClusterMyID(ctx(t)).Val(); again != id {
		t.Fatalf("node id %q after a crash, was %q", again, id)
	}
}

func TestCorruptNodeIDStopsStartup(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node-id")
	if err := os.WriteFile(path, []byte("not a node id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := startMustFail(t, "--addr", freeAddr(t), "--data-dir", dir)
	if err == nil || !strings.Contains(out, path) || !strings.Contains(out, "corrupt") {
		t.Fatalf("exit %v, output %q: want an error naming %s", err, out, path)
	}
}

func TestAdvertiseAddr(t *testing.T) {
	s := StartServer(t, "--advertise-addr", "10.20.30.40:7000")
	c := s.Client()
	slots := c.ClusterSlots(ctx(t)).Val()
	if len(slots) != 1 || slots[0].Nodes[0].Addr != "10.20.30.40:7000" {
		t.Fatalf("CLUSTER SLOTS with --advertise-addr = %+v", slots)
	}
	shards := c.ClusterShards(ctx(t)).Val()
	if len(shards) != 1 || len(shards[0].Nodes) != 1 || shards[0].Nodes[0].IP != "10.20.30.40" ||
		shards[0].Nodes[0].Port != 7000 || shards[0].Nodes[0].Health != "online" ||
		len(shards[0].Slots) != 1 || shards[0].Slots[0].End != 16383 {
		t.Fatalf("CLUSTER SHARDS = %+v", shards)
	}
	if nodes := c.ClusterNodes(ctx(t)).Val(); !strings.Contains(nodes, " 10.20.30.40:7000@17000 ") {
		t.Fatalf("CLUSTER NODES = %q", nodes)
	}
}
