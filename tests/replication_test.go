package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Three nodes replicate every limiter kind; followers redirect; topology
// and ROLE describe the leader and its replicas; all end with one digest.
func TestClusterReplicates(t *testing.T) {
	c := StartCluster(t, 3, nil)
	leader := c.Leader()
	cc := c.Client()
	for i := range 20 {
		k := fmt.Sprintf("{u%d}", i%4)
		for _, args := range [][]any{
			{"CL.THROTTLE", k + "g", 5, 10, 60},
			{"SW.CHECK", k + "s", 10, 60, "EXACT"},
			{"SW.CHECK", k + "c", 10, 60},
			{"FW.CHECK", k + "f", 10, 60},
			{"CONC.ACQUIRE", k + "l", 3, 30, fmt.Sprint("req", i%5)},
			{"QUOTA.CHECK", k + "q", 100, "MONTH", "TZ", "Europe/Berlin"},
		} {
			if err := cc.Do(ctx(t), args...).Err(); err != nil {
				t.Fatalf("%v: %v", args, err)
			}
		}
	}
	if err := cc.Do(ctx(t), "DEL", "{u0}g").Err(); err != nil {
		t.Fatal(err)
	}
	d := c.SameDigests()
	if d == digestOf(t, leader) && d == "" {
		t.Fatal("no digest")
	}

	lc := leader.Client()
	if n, err := lc.Do(ctx(t), "WAIT", 1, 0).Int(); err != nil || n < 1 {
		t.Fatalf("WAIT after a write = %d, %v; want at least one replica", n, err)
	}
	for _, f := range c.Followers(leader) {
		fc := f.Client(func(o *redis.Options) { o.MaxRetries = -1 })
		err := fc.Do(ctx(t), "CL.THROTTLE", "{u1}g", 5, 10, 60).Err()
		want := fmt.Sprintf("MOVED %d %s", keySlot(t, lc, "{u1}g"), leader.Addr)
		if err == nil || err.Error() != want {
			t.Fatalf("follower %s: %v, want %q", f.Addr, err, want)
		}
		if err := fc.Do(ctx(t), "CL.THROTTLE", "{u1}g", 5, 10, 60, 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
			t.Fatalf("a peek on a follower: %v, want MOVED", err)
		}
		r, err := fc.Do(ctx(t), "ROLE").Slice()
		if err != nil || r[0] != "slave" || fmt.Sprint(r[1], ":", r[2]) != leader.Addr {
			t.Fatalf("follower ROLE = %v, %v", r, err)
		}
		if got := digestOf(t, f); got != d {
			t.Fatalf("follower digest %s, leader %s", got, d)
		}
		if v := infoField(t, fc, "replication", "role"); v != "slave" {
			t.Fatalf("INFO replication role = %q", v)
		}
	}
	r, err := lc.Do(ctx(t), "ROLE").Slice()
	if err != nil || r[0] != "master" || len(r[2].([]any)) != 2 {
		t.Fatalf("leader ROLE = %v, %v", r, err)
	}
	slots, err := lc.ClusterSlots(ctx(t)).Result()
	if err != nil || len(slots) != 1 || len(slots[0].Nodes) != 3 || slots[0].Nodes[0].Addr != leader.Addr {
		t.Fatalf("CLUSTER SLOTS = %+v, %v", slots, err)
	}
	nodes, err := lc.ClusterNodes(ctx(t)).Result()
	if err != nil || strings.Count(nodes, "slave") != 2 || strings.Count(nodes, "master") != 1 {
		t.Fatalf("CLUSTER NODES =\n%s", nodes)
	}
	if err := lc.Save(ctx(t)).Err(); err != nil {
		t.Fatalf("SAVE (a Raft snapshot) on the leader: %v", err)
	}
	if v := infoField(t, lc, "persistence", "rdb_last_save_time"); v == "0" {
		t.Fatal("LASTSAVE did not move after SAVE")
	}
	if out := redisCLI(t, c.Nodes[0].Addr, "-c", "CL.THROTTLE", "{u2}g", "5", "10", "60"); !strings.HasPrefix(out, "0\n6\n") {
		t.Fatalf("redis-cli -c: %q", out)
	}
}

func keySlot(t testing.TB, c *redis.Client, key string) int64 {
	n, err := c.ClusterKeySlot(ctx(t), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A pipeline's machine commands travel through the log together; every
// reply comes back in its place among the others, for multibulk and inline
// requests alike, in RESP2 and RESP3.
func TestClusterPipelineOrder(t *testing.T) {
	c := StartCluster(t, 3, nil)
	leader := c.Leader()
	for _, proto := range []int{2, 3} {
		lc := leader.Client(func(o *redis.Options) { o.Protocol = proto })
		key := fmt.Sprintf("{p%d}", proto)
		p := lc.Pipeline()
		a := p.Do(ctx(t), "CL.THROTTLE", key+"a", 1, 1, 60)
		ping := p.Ping(ctx(t))
		b := p.Do(ctx(t), "CL.THROTTLE", key+"a", 1, 1, 60)
		echo := p.Echo(ctx(t), "between")
		miss := p.Do(ctx(t), "QUOTA.GET", key+"none")
		third := p.Do(ctx(t), "CL.THROTTLE", key+"a", 1, 1, 60)
		if _, err := p.Exec(ctx(t)); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		ra, _ := a.Int64Slice()
		rb, _ := b.Int64Slice()
		r3, _ := third.Int64Slice()
		if fmt.Sprint(ra[:3], rb[:3], r3[:3]) != "[0 2 1] [0 2 0] [1 2 0]" || ping.Val() != "PONG" || echo.Val() != "between" || miss.Err() != redis.Nil {
			t.Fatalf("RESP%d pipeline: %v %v %v %q %q %v", proto, ra, rb, r3, ping.Val(), echo.Val(), miss.Err())
		}
	}
	// Inline requests, several in one write.
	out := rawExchange(t, leader.Addr, "CL.THROTTLE {i}k 0 1 60\r\nPING\r\nCL.THROTTLE {i}k 0 1 60\r\n", 3)
	if !strings.HasPrefix(out, "*5\r\n:0\r\n") || !strings.Contains(out, "+PONG\r\n*5\r\n:1\r\n") {
		t.Fatalf("inline pipeline answered %q", out)
	}
}

// A pipeline mixing machine commands with surface ones (KEYS, SCAN, DBSIZE
// …) answers byte for byte as one node does: each command sees the effects
// of those sent before it.
func TestClusterPipelineSameAsOneNode(t *testing.T) {
	single := StartServer(t)
	cl := StartCluster(t, 3, nil)
	leader := cl.Leader()
	const pipeline = "CL.THROTTLE {o}old 5 1 3600\r\nFLUSHALL\r\nCL.THROTTLE {o}new 5 1 3600\r\nKEYS *\r\nDBSIZE\r\n" +
		"PING\r\nCL.THROTTLE {o}two 5 1 3600\r\nSCAN 0 COUNT 1000 MATCH {o}t*\r\nEXISTS {o}old {o}new {o}two\r\nDEL {o}new\r\nKEYS *\r\nECHO end\r\n"
	want := rawExchange(t, single.Addr, pipeline, 12)
	got := rawExchange(t, leader.Addr, pipeline, 12)
	if got != want {
		t.Fatalf("3-node leader:\n%q\none node:\n%q", got, want)
	}
	if !strings.Contains(want, "*1\r\n$6\r\n{o}new\r\n:1\r\n") {
		t.Fatalf("one node's replies are not what the test expects: %q", want)
	}
}
